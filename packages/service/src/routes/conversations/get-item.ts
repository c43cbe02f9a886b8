import type { ResourceAuthorization } from "@gw/core/authz";
import { notFound } from "@gw/core/errors";
import { principalOf, requirePermission } from "@gw/core/http";
import type { Router } from "express";
import type { ConversationStore } from "../../conversations/store.ts";
import { requireRole } from "../access.ts";

/** `GET /api/v1/llm/conversations/{id}/items/{item_id}`: one item; needs reader. */
export function registerGetItem(
  router: Router,
  deps: { store: ConversationStore; authorization: ResourceAuthorization },
): void {
  router.get(
    "/llm/conversations/:id/items/:itemId",
    requirePermission("conversations:read"),
    async (req, res) => {
      const principal = principalOf(res);
      const id = String(req.params.id);
      const itemId = String(req.params.itemId);
      await requireRole(deps.authorization, principal, { type: "conversation", id }, "reader");
      const item = await deps.store.item(principal.org, id, itemId);
      if (!item) throw notFound(`No item ${itemId} in conversation ${id}`);
      res.json(item);
    },
  );
}
