import { principalOf, type ResourceAuthorization, requirePermission } from "@gw/core";
import type { Router } from "express";
import type { ConversationStore } from "../../conversations/store.ts";
import { requireRole } from "../access.ts";

/** `GET /api/v1/llm/conversations/{id}/items`: its messages, oldest first; needs reader. */
export function registerListItems(
  router: Router,
  deps: { store: ConversationStore; authorization: ResourceAuthorization },
): void {
  router.get("/llm/conversations/:id/items", requirePermission("conversations:read"), async (req, res) => {
    const principal = principalOf(res);
    const id = String(req.params.id);
    await requireRole(deps.authorization, principal, { type: "conversation", id }, "reader");
    const items = await deps.store.items(principal.org, id);
    res.json({
      object: "list",
      data: items,
      first_id: items[0]?.id ?? null,
      last_id: items.at(-1)?.id ?? null,
      has_more: false,
    });
  });
}
