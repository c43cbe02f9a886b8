import { notFound, principalOf, type ResourceAuthorization, requirePermission } from "@gw/core";
import type { Router } from "express";
import type { ResponseStore } from "../../responses/store.ts";
import { requireRole } from "../access.ts";

/** `GET /api/v1/llm/responses/{id}`: needs reader. */
export function registerGetResponse(
  router: Router,
  deps: { responses: ResponseStore; authorization: ResourceAuthorization },
): void {
  router.get("/llm/responses/:id", requirePermission("responses:read"), async (req, res) => {
    const principal = principalOf(res);
    const id = String(req.params.id);
    await requireRole(deps.authorization, principal, { type: "response", id }, "reader");
    const response = await deps.responses.get(principal.org, id);
    if (!response) throw notFound(`No response ${id}`);
    res.json(response);
  });
}
