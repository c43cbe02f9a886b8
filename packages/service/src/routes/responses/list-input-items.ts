import type { ResourceAuthorization } from "@gw/core/authz";
import { notFound } from "@gw/core/errors";
import { principalOf, requirePermission } from "@gw/core/http";
import { validate } from "@gw/core/validation";
import type { Router } from "express";
import type { ResponseStore } from "../../responses/store.ts";
import { requireRole } from "../access.ts";
import { listBody, pageOf, pageQuery, unknownAfter } from "../pagination.ts";

/**
 * `GET /api/v1/llm/responses/{id}/input_items?limit&after&order`: the items
 * the response was asked with (not the earlier context), paged as OpenAI
 * pages lists; needs reader.
 */
export function registerListInputItems(
  router: Router,
  deps: { responses: ResponseStore; authorization: ResourceAuthorization },
): void {
  router.get("/llm/responses/:id/input_items", requirePermission("responses:read"), async (req, res) => {
    const q = validate("query", pageQuery, req.query);
    const principal = principalOf(res);
    const id = String(req.params.id);
    await requireRole(deps.authorization, principal, { type: "response", id }, "reader");
    const input = await deps.responses.input(principal.org, id);
    if (!input) throw notFound(`No response ${id}`);
    const page = pageOf(input, q);
    if (!page) throw unknownAfter(q.after);
    res.json(listBody(page.items, page.hasMore));
  });
}
