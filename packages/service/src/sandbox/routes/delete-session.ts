import { defineRoute } from "@gw/core/http";
import { deletedSchema } from "@gw/core/openapi";
import { ok } from "../../http/schemas.ts";
import { clientSignal } from "./client-signal.ts";
import { type SandboxRouteDeps, TAG } from "./schemas.ts";

/** `DELETE /api/v1/sandbox/sessions/{id}` → `{id, object: "sandbox.session.deleted", deleted: true}`; the workspace goes too. */
export const deleteSession = defineRoute({
  method: "DELETE",
  path: "/api/v1/sandbox/sessions/:id",
  operationId: "deleteSandboxSession",
  summary: "Delete a session and its workspace",
  tag: TAG,
  permission: "sandbox:write",
  responses: ok("Deleted", deletedSchema("sandbox.session.deleted")),
  errors: ["not_found"],
  handler: async ({ principal, params, res }, deps: SandboxRouteDeps) => {
    const id = params.id!;
    await deps.sandbox.deleteSession(principal, id, clientSignal(res));
    return { id, object: "sandbox.session.deleted", deleted: true };
  },
});
