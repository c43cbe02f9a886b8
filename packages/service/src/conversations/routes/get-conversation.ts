import { notFound } from "@gw/core/errors";
import { defineRoute } from "@gw/core/http";
import { ok } from "../../http/schemas.ts";
import { type ConversationRouteDeps, conversationRole, TAG } from "./deps.ts";
import { conversation as conversationSchema } from "./schemas.ts";

/** `GET /api/v1/llm/conversations/{id}`: needs reader. */
export const getConversation = defineRoute({
  method: "GET",
  path: "/api/v1/llm/conversations/:id",
  operationId: "getConversation",
  summary: "A conversation (reader)",
  tag: TAG,
  permission: "conversations:read",
  responses: ok("The conversation", conversationSchema),
  errors: ["not_found"],
  authorize: conversationRole("reader"),
  handler: async ({ principal, params }, deps: ConversationRouteDeps) => {
    const conversation = await deps.conversations.get(principal.org, params.id!);
    if (!conversation) throw notFound(`No conversation ${params.id}`);
    return conversation;
  },
});
