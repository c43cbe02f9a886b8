import { defineRoute } from "@gw/core/http";
import { ok } from "../../http/schemas.ts";
import { type SandboxRouteDeps, session, TAG } from "./schemas.ts";

/** `GET /api/v1/sandbox/sessions/{id}` → the session; another principal's is 404. */
export const getSession = defineRoute({
  method: "GET",
  path: "/api/v1/sandbox/sessions/:id",
  operationId: "getSandboxSession",
  summary: "A session of the principal's",
  tag: TAG,
  permission: "sandbox:read",
  responses: ok("The session", session),
  errors: ["not_found"],
  handler: ({ principal, params }, deps: SandboxRouteDeps) =>
    deps.sandbox.sessions.get(principal, params.id!),
});
