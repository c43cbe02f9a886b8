import type { ResourceAuthorization } from "@gw/core/authz";
import { notFound } from "@gw/core/errors";
import { principalOf, requirePermission } from "@gw/core/http";
import { validate } from "@gw/core/validation";
import type { Router } from "express";
import { z } from "zod";
import type { CompletionStore } from "../../completions/store.ts";
import { requireRole } from "../access.ts";
import { metadataSchema } from "../conversations/metadata.ts";
import { deprecated } from "./deprecation.ts";

/** `null` clears the metadata, as OpenAI's update does. */
export const updateCompletionBody = z.strictObject({
  metadata: metadataSchema.nullable().transform((m) => m ?? {}),
});

/** `POST /api/v1/llm/chat/completions/{id}` `{metadata}`: replaces a stored completion's metadata; needs writer. */
export function registerUpdateCompletion(
  router: Router,
  deps: { completions: CompletionStore; authorization: ResourceAuthorization },
): void {
  router.post(
    "/llm/chat/completions/:id",
    deprecated,
    requirePermission("responses:write"),
    async (req, res) => {
      const principal = principalOf(res);
      const id = String(req.params.id);
      await requireRole(deps.authorization, principal, { type: "completion", id }, "writer");
      const input = validate("body", updateCompletionBody, req.body);
      const completion = await deps.completions.get(principal.org, id);
      if (!completion) throw notFound(`No completion ${id}`);
      completion.metadata = input.metadata;
      if (!(await deps.completions.replace(principal.org, completion))) throw notFound(`No completion ${id}`);
      res.json(completion);
    },
  );
}
