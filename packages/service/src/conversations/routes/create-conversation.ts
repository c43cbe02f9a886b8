import { defineRoute } from "@gw/core/http";
import { z } from "zod";
import { ok } from "../../http/schemas.ts";
import { inputItem, toItems } from "../../items/input.ts";
import { withoutNulls } from "../../schema.ts";
import { metadataSchema } from "../metadata.ts";
import type { Conversation } from "../store.ts";
import { MAX_NEW_ITEMS } from "./add-items.ts";
import type { ConversationRouteDeps } from "./deps.ts";
import { TAG } from "./deps.ts";
import { conversation as conversationSchema } from "./schemas.ts";

// An empty list is a conversation without items yet (the Agents SDK's sessions start so).
export const createConversationBody = z.strictObject({
  metadata: metadataSchema.optional(),
  items: z.array(inputItem).max(MAX_NEW_ITEMS).optional(),
});

/**
 * `POST /api/v1/llm/conversations` `{metadata?, items?}` → 200 the
 * conversation. The principal is made its owner in SpiceDB before anything
 * is stored: if that fails, nothing exists; if storing fails, the ownership
 * is given back.
 */
export const createConversation = defineRoute({
  method: "POST",
  path: "/api/v1/llm/conversations",
  operationId: "createConversation",
  summary: "Create a conversation; the principal becomes its owner",
  tag: TAG,
  permission: "conversations:write",
  body: createConversationBody,
  bodyValidation: { prepare: (raw) => withoutNulls(raw === undefined ? {} : raw) },
  responses: ok("The conversation", conversationSchema),
  handler: async ({ principal, body }, deps: ConversationRouteDeps) => {
    const conversation: Conversation = {
      id: deps.ids.newId("conv"),
      object: "conversation",
      created_at: Math.floor(deps.clock.wall() / 1000),
      metadata: body.metadata ?? {},
    };
    const resource = { type: "conversation" as const, id: conversation.id };
    await deps.authorization.createOwnership(principal, resource);
    try {
      await deps.conversations.create(
        principal.org,
        conversation,
        body.items?.length ? toItems(body.items, deps.ids) : [],
      );
    } catch (err) {
      // Not stored (PostgreSQL away…): its id must keep no owner relationship. If this delete fails
      // too, the orphan reconciler removes it later (docs/operations.md).
      await deps.authorization.deleteResource(principal, resource).catch(() => undefined);
      throw err;
    }
    return conversation;
  },
});
