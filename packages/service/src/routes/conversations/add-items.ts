import type { ResourceAuthorization } from "@gw/core/authz";
import { notFound } from "@gw/core/errors";
import { principalOf, requirePermission } from "@gw/core/http";
import { validate } from "@gw/core/validation";
import type { Router } from "express";
import { z } from "zod";
import type { ConversationStore } from "../../conversations/store.ts";
import { inputItem, toItems } from "../../items/input.ts";
import { notSupported, withoutNulls } from "../../schema.ts";
import { requireRole } from "../access.ts";
import { listBody } from "../pagination.ts";

/** Items added at once at most, as OpenAI takes them. */
export const MAX_NEW_ITEMS = 20;

export const addItemsBody = z.strictObject({ items: z.array(inputItem).min(1).max(MAX_NEW_ITEMS) });
export const addItemsQuery = z.object({
  include: notSupported("include"),
  "include[]": notSupported("include"),
});

/**
 * `POST /api/v1/llm/conversations/{id}/items` `{items}` → the added items as a
 * list, with their new ids, appended in order; needs writer.
 */
export function registerAddItems(
  router: Router,
  deps: { store: ConversationStore; authorization: ResourceAuthorization },
): void {
  router.post("/llm/conversations/:id/items", requirePermission("conversations:write"), async (req, res) => {
    const principal = principalOf(res);
    const id = String(req.params.id);
    await requireRole(deps.authorization, principal, { type: "conversation", id }, "writer");
    validate("query", addItemsQuery, req.query);
    const input = validate("body", addItemsBody, withoutNulls(req.body));
    const items = toItems(input.items);
    if (!(await deps.store.append(principal.org, id, items))) throw notFound(`No conversation ${id}`);
    res.json(listBody(items, false));
  });
}
