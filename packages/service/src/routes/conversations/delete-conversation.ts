import type { ResourceAuthorization } from "@gw/core/authz";
import { principalOf, requirePermission } from "@gw/core/http";
import type { Router } from "express";
import type { ConversationStore } from "../../conversations/store.ts";
import { requireRole } from "../access.ts";

/** `DELETE /api/v1/llm/conversations/{id}`: needs owner; removes the conversation, its items and its relationships. */
export function registerDeleteConversation(
  router: Router,
  deps: { store: ConversationStore; authorization: ResourceAuthorization },
): void {
  router.delete("/llm/conversations/:id", requirePermission("conversations:write"), async (req, res) => {
    const principal = principalOf(res);
    const id = String(req.params.id);
    await requireRole(deps.authorization, principal, { type: "conversation", id }, "owner");
    // Relationships first, guarded by the caller's ownership: if that is gone meanwhile, nothing is deleted.
    await deps.authorization.deleteResource(principal, { type: "conversation", id });
    await deps.store.delete(principal.org, id);
    res.json({ id, object: "conversation.deleted", deleted: true });
  });
}
