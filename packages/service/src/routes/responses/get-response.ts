import type { ResourceAuthorization } from "@gw/core/authz";
import { notFound } from "@gw/core/errors";
import { principalOf, requirePermission } from "@gw/core/http";
import { validate } from "@gw/core/validation";
import type { Router } from "express";
import { z } from "zod";
import type { ResponseStore } from "../../responses/store.ts";
import { notSupported } from "../../schema.ts";
import { requireRole } from "../access.ts";

export const getResponseQuery = z.object({
  // Replaying a response as a stream is for background responses, which this service does not run.
  stream: notSupported("Streaming a stored response", (v) => v === "false"),
  starting_after: notSupported("starting_after"),
});

/** `GET /api/v1/llm/responses/{id}`: needs reader. */
export function registerGetResponse(
  router: Router,
  deps: { responses: ResponseStore; authorization: ResourceAuthorization },
): void {
  router.get("/llm/responses/:id", requirePermission("responses:read"), async (req, res) => {
    const principal = principalOf(res);
    const id = String(req.params.id);
    await requireRole(deps.authorization, principal, { type: "response", id }, "reader");
    validate("query", getResponseQuery, req.query);
    const response = await deps.responses.get(principal.org, id);
    if (!response) throw notFound(`No response ${id}`);
    res.json(response);
  });
}
