import type { ResourceAuthorization } from "@gw/core/authz";
import { notFound } from "@gw/core/errors";
import { principalOf, requirePermission } from "@gw/core/http";
import type { Router } from "express";
import type { ConversationStore } from "../../conversations/store.ts";
import { requireRole } from "../access.ts";

/** `DELETE /api/v1/llm/conversations/{id}/items/{item_id}` → the conversation, as OpenAI answers; needs writer. */
export function registerDeleteItem(
  router: Router,
  deps: { store: ConversationStore; authorization: ResourceAuthorization },
): void {
  router.delete(
    "/llm/conversations/:id/items/:itemId",
    requirePermission("conversations:write"),
    async (req, res) => {
      const principal = principalOf(res);
      const id = String(req.params.id);
      const itemId = String(req.params.itemId);
      await requireRole(deps.authorization, principal, { type: "conversation", id }, "writer");
      const conversation = await deps.store.get(principal.org, id);
      if (!conversation || !(await deps.store.deleteItem(principal.org, id, itemId)))
        throw notFound(`No item ${itemId} in conversation ${id}`);
      res.json(conversation);
    },
  );
}
