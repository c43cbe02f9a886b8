import type { ResourceAuthorization, WriterDeletion } from "@gw/core/authz";
import { principalOf, requirePermission } from "@gw/core/http";
import type { Router } from "express";
import type { ResponseStore } from "../../responses/store.ts";
import { requireRole } from "../access.ts";

/**
 * `DELETE /api/v1/llm/responses/{id}` → `{id, object: "response", deleted: true}`:
 * needs writer (an owner is one). Its relationships go first, guarded by the
 * caller's write access when the delete lands; then the record and its input items.
 */
export function registerDeleteResponse(
  router: Router,
  deps: { responses: ResponseStore; authorization: ResourceAuthorization; deletion: WriterDeletion },
): void {
  router.delete("/llm/responses/:id", requirePermission("responses:write"), async (req, res) => {
    const principal = principalOf(res);
    const id = String(req.params.id);
    await requireRole(deps.authorization, principal, { type: "response", id }, "writer");
    await deps.deletion.delete(principal, { type: "response", id });
    await deps.responses.delete(principal.org, id);
    res.json({ id, object: "response", deleted: true });
  });
}
