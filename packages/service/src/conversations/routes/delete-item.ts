import { notFound } from "@gw/core/errors";
import { defineRoute } from "@gw/core/http";
import { ok } from "../../http/schemas.ts";
import { type ConversationRouteDeps, conversationRole, TAG } from "./deps.ts";
import { conversation as conversationSchema } from "./schemas.ts";

/** `DELETE /api/v1/llm/conversations/{id}/items/{item_id}` → the conversation, as OpenAI answers; needs writer. */
export const deleteItem = defineRoute({
  method: "DELETE",
  path: "/api/v1/llm/conversations/:id/items/:itemId",
  operationId: "deleteConversationItem",
  summary: "Delete one item of a conversation (writer); answers the conversation",
  tag: TAG,
  permission: "conversations:write",
  responses: ok("The conversation", conversationSchema),
  errors: ["not_found"],
  authorize: conversationRole("writer"),
  handler: async ({ principal, params }, deps: ConversationRouteDeps) => {
    const { id, itemId } = params as { id: string; itemId: string };
    const conversation = await deps.conversations.get(principal.org, id);
    if (!conversation || !(await deps.conversations.deleteItem(principal.org, id, itemId)))
      throw notFound(`No item ${itemId} in conversation ${id}`);
    return conversation;
  },
});
