import { notFound } from "@gw/core/errors";
import { defineRoute } from "@gw/core/http";
import { item, ok } from "../../http/schemas.ts";
import { type ConversationRouteDeps, conversationRole, TAG } from "./deps.ts";

/** `GET /api/v1/llm/conversations/{id}/items/{item_id}`: one item; needs reader. */
export const getItem = defineRoute({
  method: "GET",
  path: "/api/v1/llm/conversations/:id/items/:itemId",
  operationId: "getConversationItem",
  summary: "One item of a conversation (reader)",
  tag: TAG,
  permission: "conversations:read",
  responses: ok("The item", item),
  errors: ["not_found"],
  authorize: conversationRole("reader"),
  handler: async ({ principal, params }, deps: ConversationRouteDeps) => {
    const { id, itemId } = params as { id: string; itemId: string };
    const found = await deps.conversations.item(principal.org, id, itemId);
    if (!found) throw notFound(`No item ${itemId} in conversation ${id}`);
    return found;
  },
});
