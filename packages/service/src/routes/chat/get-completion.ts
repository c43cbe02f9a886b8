import type { ResourceAuthorization } from "@gw/core/authz";
import { notFound } from "@gw/core/errors";
import { principalOf, requirePermission } from "@gw/core/http";
import type { Router } from "express";
import type { CompletionStore } from "../../completions/store.ts";
import { requireRole } from "../access.ts";
import { deprecated } from "./deprecation.ts";

/** `GET /api/v1/llm/chat/completions/{id}`: a stored completion; needs reader. */
export function registerGetCompletion(
  router: Router,
  deps: { completions: CompletionStore; authorization: ResourceAuthorization },
): void {
  router.get(
    "/llm/chat/completions/:id",
    deprecated,
    requirePermission("responses:read"),
    async (req, res) => {
      const principal = principalOf(res);
      const id = String(req.params.id);
      await requireRole(deps.authorization, principal, { type: "completion", id }, "reader");
      const completion = await deps.completions.get(principal.org, id);
      if (!completion) throw notFound(`No completion ${id}`);
      res.json(completion);
    },
  );
}
