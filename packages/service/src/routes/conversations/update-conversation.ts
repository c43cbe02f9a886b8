import type { ResourceAuthorization } from "@gw/core/authz";
import { notFound } from "@gw/core/errors";
import { principalOf, requirePermission } from "@gw/core/http";
import { validate } from "@gw/core/validation";
import type { Router } from "express";
import { z } from "zod";
import type { ConversationStore } from "../../conversations/store.ts";
import { requireRole } from "../access.ts";
import { metadataSchema } from "./metadata.ts";

/** `null` clears the metadata, as OpenAI's update does. */
export const updateConversationBody = z.strictObject({
  metadata: metadataSchema.nullable().transform((m) => m ?? {}),
});

/** `POST /api/v1/llm/conversations/{id}` `{metadata}`: replaces the metadata; needs writer. */
export function registerUpdateConversation(
  router: Router,
  deps: { store: ConversationStore; authorization: ResourceAuthorization },
): void {
  router.post("/llm/conversations/:id", requirePermission("conversations:write"), async (req, res) => {
    const principal = principalOf(res);
    const id = String(req.params.id);
    await requireRole(deps.authorization, principal, { type: "conversation", id }, "writer");
    const input = validate("body", updateConversationBody, req.body);
    const conversation = await deps.store.get(principal.org, id);
    if (!conversation) throw notFound(`No conversation ${id}`);
    conversation.metadata = input.metadata;
    if (!(await deps.store.update(principal.org, conversation))) throw notFound(`No conversation ${id}`);
    res.json(conversation);
  });
}
