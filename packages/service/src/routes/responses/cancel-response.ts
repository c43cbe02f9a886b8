import type { ResourceAuthorization } from "@gw/core/authz";
import { AppError } from "@gw/core/errors";
import { principalOf, requirePermission } from "@gw/core/http";
import type { Router } from "express";
import { requireRole } from "../access.ts";

/**
 * `POST /api/v1/llm/responses/{id}/cancel`: only background responses can be
 * cancelled, and this service runs none, so a writer gets 400; others get
 * the 404 or 403 of any response they may not change.
 */
export function registerCancelResponse(router: Router, deps: { authorization: ResourceAuthorization }): void {
  router.post("/llm/responses/:id/cancel", requirePermission("responses:write"), async (req, res) => {
    const principal = principalOf(res);
    const id = String(req.params.id);
    await requireRole(deps.authorization, principal, { type: "response", id }, "writer");
    throw new AppError(
      "bad_request",
      "Only background responses can be cancelled; this one has already finished",
    );
  });
}
