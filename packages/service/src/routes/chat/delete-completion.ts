import type { ResourceAuthorization, WriterDeletion } from "@gw/core/authz";
import { principalOf, requirePermission } from "@gw/core/http";
import type { Router } from "express";
import type { CompletionStore } from "../../completions/store.ts";
import { requireRole } from "../access.ts";
import { deprecated } from "./deprecation.ts";

/**
 * `DELETE /api/v1/llm/chat/completions/{id}` → `{id, object: "chat.completion.deleted", deleted: true}`:
 * needs writer. Its relationships go first, guarded by the caller's write
 * access when the delete lands; then the record and its messages.
 */
export function registerDeleteCompletion(
  router: Router,
  deps: { completions: CompletionStore; authorization: ResourceAuthorization; deletion: WriterDeletion },
): void {
  router.delete(
    "/llm/chat/completions/:id",
    deprecated,
    requirePermission("responses:write"),
    async (req, res) => {
      const principal = principalOf(res);
      const id = String(req.params.id);
      await requireRole(deps.authorization, principal, { type: "completion", id }, "writer");
      await deps.deletion.delete(principal, { type: "completion", id });
      await deps.completions.delete(principal.org, id);
      res.json({ id, object: "chat.completion.deleted", deleted: true });
    },
  );
}
