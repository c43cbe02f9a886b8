import type { ResourceAuthorization } from "@gw/core/authz";
import { notFound } from "@gw/core/errors";
import { principalOf, requirePermission } from "@gw/core/http";
import { validate } from "@gw/core/validation";
import type { Router } from "express";
import type { ConversationStore } from "../../conversations/store.ts";
import { requireRole } from "../access.ts";
import { listBody, pageQuery, unknownAfter } from "../pagination.ts";

/**
 * `GET /api/v1/llm/conversations/{id}/items?limit&after&order`: a page of its
 * items, as OpenAI pages them (`limit` 1 to 100, default 20; `after` an item
 * id; `order` `desc` by default, newest first); needs reader.
 */
export function registerListItems(
  router: Router,
  deps: { store: ConversationStore; authorization: ResourceAuthorization },
): void {
  router.get("/llm/conversations/:id/items", requirePermission("conversations:read"), async (req, res) => {
    const q = validate("query", pageQuery, req.query);
    const principal = principalOf(res);
    const id = String(req.params.id);
    await requireRole(deps.authorization, principal, { type: "conversation", id }, "reader");
    const page = await deps.store.page(principal.org, id, q);
    if (page === null) throw notFound(`No conversation ${id}`);
    if (!page) throw unknownAfter(q.after);
    res.json(listBody(page.items, page.hasMore));
  });
}
