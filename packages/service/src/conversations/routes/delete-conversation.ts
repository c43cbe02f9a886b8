import { defineRoute } from "@gw/core/http";
import { deletedSchema } from "@gw/core/openapi";
import { ok } from "../../http/schemas.ts";
import { type ConversationRouteDeps, conversationRole, TAG } from "./deps.ts";

/** `DELETE /api/v1/llm/conversations/{id}`: needs owner; removes the conversation, its items and its relationships. */
export const deleteConversation = defineRoute({
  method: "DELETE",
  path: "/api/v1/llm/conversations/:id",
  operationId: "deleteConversation",
  summary: "Delete a conversation, its items and its relationships (owner)",
  tag: TAG,
  permission: "conversations:write",
  responses: ok("Deleted", deletedSchema("conversation.deleted")),
  errors: ["not_found"],
  authorize: conversationRole("owner"),
  handler: async ({ principal, params }, deps: ConversationRouteDeps) => {
    const id = params.id!;
    // Relationships first, guarded by the caller's ownership: if that is gone meanwhile, nothing is deleted.
    await deps.authorization.deleteResource(principal, { type: "conversation", id });
    await deps.conversations.delete(principal.org, id);
    return { id, object: "conversation.deleted", deleted: true };
  },
});
