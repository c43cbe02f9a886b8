import { defineRoute } from "@gw/core/http";
import { noContent } from "../../http/schemas.ts";
import { type SandboxRouteDeps, TAG } from "./schemas.ts";

/** `DELETE /api/v1/sandbox/connections/github` → 204, whether or not one was stored. */
export const deleteConnection = defineRoute({
  method: "DELETE",
  path: "/api/v1/sandbox/connections/github",
  operationId: "deleteGitHubConnection",
  summary: "Forget the principal's credential, whether or not one was stored",
  tag: TAG,
  permission: "sandbox:write",
  responses: noContent,
  handler: async ({ principal, res }, deps: SandboxRouteDeps) => {
    await deps.sandbox.connections.delete(principal);
    res.status(204).end();
  },
});
