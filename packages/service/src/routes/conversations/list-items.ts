import {
  principalOf,
  type ResourceAuthorization,
  requirePermission,
  ValidationFailed,
  validate,
} from "@gw/core";
import type { Router } from "express";
import { z } from "zod";
import type { ConversationStore } from "../../conversations/store.ts";
import { requireRole } from "../access.ts";

const query = z.object({
  // Query values are strings: whole numbers become numbers, anything else fails as itself.
  limit: z
    .preprocess(
      (v) => (typeof v === "string" && /^[+-]?\d{1,9}$/.test(v) ? Number(v) : v),
      z.int().min(1).max(100),
    )
    .default(20),
  after: z.string().min(1).max(256).optional(),
  order: z.enum(["asc", "desc"]).default("desc"),
});

/**
 * `GET /api/v1/llm/conversations/{id}/items?limit&after&order`: a page of its
 * messages, as OpenAI pages them (`limit` 1 to 100, default 20; `after` an
 * item id; `order` `desc` by default, newest first); needs reader.
 */
export function registerListItems(
  router: Router,
  deps: { store: ConversationStore; authorization: ResourceAuthorization },
): void {
  router.get("/llm/conversations/:id/items", requirePermission("conversations:read"), async (req, res) => {
    const q = validate("query", query, req.query);
    const principal = principalOf(res);
    const id = String(req.params.id);
    await requireRole(deps.authorization, principal, { type: "conversation", id }, "reader");
    const page = await deps.store.page(principal.org, id, q);
    if (!page) {
      throw new ValidationFailed([
        {
          loc: ["query", "after"],
          msg: "No item with this id in the conversation",
          type: "value_error",
          input: q.after,
        },
      ]);
    }
    res.json({
      object: "list",
      data: page.items,
      first_id: page.items[0]?.id ?? null,
      last_id: page.items.at(-1)?.id ?? null,
      has_more: page.hasMore,
    });
  });
}
