import type { ResourceAuthorization, WriterDeletion } from "@gw/core/authz";
import { defineRoute } from "@gw/core/http";
import { deletedSchema } from "@gw/core/openapi";
import { roleOn } from "../../http/roles.ts";
import { ok } from "../../http/schemas.ts";
import type { CompletionStore } from "../store.ts";
import { DEPRECATED, TAG } from "./deprecation.ts";

/**
 * `DELETE /api/v1/llm/chat/completions/{id}` → `{id, object: "chat.completion.deleted", deleted: true}`:
 * needs writer. Its relationships go first, guarded by the caller's write
 * access when the delete lands; then the record and its messages.
 */
export const deleteCompletion = defineRoute({
  method: "DELETE",
  path: "/api/v1/llm/chat/completions/:id",
  operationId: "deleteChatCompletion",
  summary: "Delete a stored completion and its relationships (writer)",
  tag: TAG,
  deprecated: DEPRECATED,
  permission: "responses:write",
  responses: ok("Deleted", deletedSchema("chat.completion.deleted")),
  errors: ["not_found"],
  authorize: roleOn("completion", "writer"),
  handler: async (
    { principal, params },
    deps: { completions: CompletionStore; authorization: ResourceAuthorization; deletion: WriterDeletion },
  ) => {
    const id = params.id!;
    await deps.deletion.delete(principal, { type: "completion", id });
    await deps.completions.delete(principal.org, id);
    return { id, object: "chat.completion.deleted", deleted: true };
  },
});
