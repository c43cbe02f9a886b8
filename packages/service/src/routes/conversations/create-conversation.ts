import type { ResourceAuthorization } from "@gw/core/authz";
import { principalOf, requirePermission } from "@gw/core/http";
import { validate } from "@gw/core/validation";
import type { Router } from "express";
import { z } from "zod";
import type { Conversation, ConversationStore } from "../../conversations/store.ts";
import { newId } from "../../ids.ts";
import { inputItem, toItems } from "../../items/input.ts";
import { withoutNulls } from "../../schema.ts";
import { MAX_NEW_ITEMS } from "./add-items.ts";
import { metadataSchema } from "./metadata.ts";

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
export function registerCreateConversation(
  router: Router,
  deps: { store: ConversationStore; authorization: ResourceAuthorization },
): void {
  router.post("/llm/conversations", requirePermission("conversations:write"), async (req, res) => {
    const input = validate("body", createConversationBody, withoutNulls(req.body ?? {}));
    const principal = principalOf(res);
    const conversation: Conversation = {
      id: newId("conv"),
      object: "conversation",
      created_at: Math.floor(Date.now() / 1000),
      metadata: input.metadata ?? {},
    };
    const resource = { type: "conversation" as const, id: conversation.id };
    await deps.authorization.createOwnership(principal, resource);
    try {
      await deps.store.create(principal.org, conversation, input.items?.length ? toItems(input.items) : []);
    } catch (err) {
      // Not stored (PostgreSQL away…): its id must keep no owner relationship. If this delete fails
      // too, the orphan reconciler removes it later (docs/operations.md).
      await deps.authorization.deleteResource(principal, resource).catch(() => undefined);
      throw err;
    }
    res.json(conversation);
  });
}
