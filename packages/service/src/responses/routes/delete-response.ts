import type { ResourceAuthorization, WriterDeletion } from "@gw/core/authz";
import { defineRoute } from "@gw/core/http";
import { deletedSchema } from "@gw/core/openapi";
import { roleOn } from "../../http/roles.ts";
import { ok } from "../../http/schemas.ts";
import type { ResponseStore } from "../store.ts";
import { TAG } from "./schemas.ts";

/**
 * `DELETE /api/v1/llm/responses/{id}` → `{id, object: "response", deleted: true}`:
 * needs writer (an owner is one). Its relationships go first, guarded by the
 * caller's write access when the delete lands; then the record and its input items.
 */
export const deleteResponse = defineRoute({
  method: "DELETE",
  path: "/api/v1/llm/responses/:id",
  operationId: "deleteResponse",
  summary: "Delete a stored response and its relationships (writer)",
  tag: TAG,
  permission: "responses:write",
  responses: ok("Deleted", deletedSchema("response")),
  errors: ["not_found"],
  authorize: roleOn("response", "writer"),
  handler: async (
    { principal, params },
    deps: { responses: ResponseStore; authorization: ResourceAuthorization; deletion: WriterDeletion },
  ) => {
    const id = params.id!;
    await deps.deletion.delete(principal, { type: "response", id });
    await deps.responses.delete(principal.org, id);
    return { id, object: "response", deleted: true };
  },
});
