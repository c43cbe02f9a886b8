import { defineRoute } from "@gw/core/http";
import { objectSchema } from "@gw/core/openapi";
import { ok } from "../../http/schemas.ts";
import type { ConnectionStatus } from "../connections.ts";
import { type SandboxRouteDeps, TAG } from "./schemas.ts";

export type { ConnectionStatus };

/** `GET /api/v1/sandbox/connections/github` → `{connected, updated_at}`; never the token. */
export const getConnection = defineRoute({
  method: "GET",
  path: "/api/v1/sandbox/connections/github",
  operationId: "getGitHubConnection",
  summary: "Whether the principal has a stored credential; never the token",
  tag: TAG,
  permission: "sandbox:read",
  responses: ok(
    "The connection's status",
    objectSchema({ connected: { type: "boolean" }, updated_at: { type: ["integer", "null"] } }),
  ),
  handler: ({ principal }, deps: SandboxRouteDeps) => deps.sandbox.connections.status(principal),
});
