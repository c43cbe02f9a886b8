import type { ResourceAuthorization } from "@gw/core/authz";
import { notFound } from "@gw/core/errors";
import { principalOf, requirePermission } from "@gw/core/http";
import { validate } from "@gw/core/validation";
import type { Router } from "express";
import { z } from "zod";
import type { CompletionStore } from "../../completions/store.ts";
import { requireRole } from "../access.ts";
import { listBody, pageOf, pageQuery, unknownAfter } from "../pagination.ts";
import { deprecated } from "./deprecation.ts";

/** OpenAI lists a completion's messages oldest first unless told otherwise. */
export const completionMessagesQuery = pageQuery.extend({ order: z.enum(["asc", "desc"]).default("asc") });

/** `GET /api/v1/llm/chat/completions/{id}/messages?limit&after&order`: the messages it was asked with; needs reader. */
export function registerListCompletionMessages(
  router: Router,
  deps: { completions: CompletionStore; authorization: ResourceAuthorization },
): void {
  router.get(
    "/llm/chat/completions/:id/messages",
    deprecated,
    requirePermission("responses:read"),
    async (req, res) => {
      const q = validate("query", completionMessagesQuery, req.query);
      const principal = principalOf(res);
      const id = String(req.params.id);
      await requireRole(deps.authorization, principal, { type: "completion", id }, "reader");
      const messages = await deps.completions.messages(principal.org, id);
      if (!messages) throw notFound(`No completion ${id}`);
      const page = pageOf(messages, q);
      if (!page) throw unknownAfter(q.after);
      res.json(listBody(page.items, page.hasMore));
    },
  );
}
