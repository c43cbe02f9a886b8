import type { ResourceAuthorization } from "@gw/core/authz";
import { notFound } from "@gw/core/errors";
import { principalOf, requirePermission } from "@gw/core/http";
import type { Router } from "express";
import type { ConversationStore } from "../../conversations/store.ts";
import { requireRole } from "../access.ts";

/** `GET /api/v1/llm/conversations/{id}`: needs reader. */
export function registerGetConversation(
  router: Router,
  deps: { store: ConversationStore; authorization: ResourceAuthorization },
): void {
  router.get("/llm/conversations/:id", requirePermission("conversations:read"), async (req, res) => {
    const principal = principalOf(res);
    const id = String(req.params.id);
    await requireRole(deps.authorization, principal, { type: "conversation", id }, "reader");
    const conversation = await deps.store.get(principal.org, id);
    if (!conversation) throw notFound(`No conversation ${id}`);
    res.json(conversation);
  });
}
