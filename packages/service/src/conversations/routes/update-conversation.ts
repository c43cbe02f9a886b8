import { notFound } from "@gw/core/errors";
import { defineRoute } from "@gw/core/http";
import { z } from "zod";
import { ok } from "../../http/schemas.ts";
import { metadataSchema } from "../metadata.ts";
import { type ConversationRouteDeps, conversationRole, TAG } from "./deps.ts";
import { conversation as conversationSchema } from "./schemas.ts";

/** `null` clears the metadata, as OpenAI's update does. */
export const updateConversationBody = z.strictObject({
  metadata: metadataSchema.nullable().transform((m) => m ?? {}),
});

/** `POST /api/v1/llm/conversations/{id}` `{metadata}`: replaces the metadata; needs writer. */
export const updateConversation = defineRoute({
  method: "POST",
  path: "/api/v1/llm/conversations/:id",
  operationId: "updateConversation",
  summary: "Replace a conversation's metadata (writer); `null` clears it",
  tag: TAG,
  permission: "conversations:write",
  body: updateConversationBody,
  responses: ok("The conversation", conversationSchema),
  errors: ["not_found"],
  authorize: conversationRole("writer"),
  handler: async ({ principal, params, body }, deps: ConversationRouteDeps) => {
    const id = params.id!;
    const conversation = await deps.conversations.get(principal.org, id);
    if (!conversation) throw notFound(`No conversation ${id}`);
    conversation.metadata = body.metadata;
    if (!(await deps.conversations.update(principal.org, conversation)))
      throw notFound(`No conversation ${id}`);
    return conversation;
  },
});
