import type { ResourceAuthorization } from "@gw/core/authz";
import { ValidationFailed } from "@gw/core/errors";
import { defineRoute } from "@gw/core/http";
import { z } from "zod";
import { ok } from "../../http/schemas.ts";
import { listBody, pageOf, pageQuery, unknownAfter } from "../../pagination.ts";
import type { CompletionStore } from "../store.ts";
import { DEPRECATED, TAG } from "./deprecation.ts";
import { completionList } from "./schemas.ts";

/** Readable completions looked at for one list at most; beyond them the list is cut (and says `has_more`). */
export const MAX_LISTED_COMPLETIONS = 10_000;
// SpiceDB takes at most 1000 per call, and `lookup` asks for one more than its page.
const LOOKUP_PAGE = 999;

export const listCompletionsQuery = pageQuery.extend({
  order: z.enum(["asc", "desc"]).default("asc"),
  model: z.string().min(1).max(256).optional(),
});

/** `metadata[key]=value` query parameters (as the SDKs send the `metadata` filter). */
function metadataFilter(raw: Record<string, unknown>): Record<string, string> {
  const filter: Record<string, string> = {};
  for (const [name, value] of Object.entries(raw)) {
    const key = /^metadata\[(.+)\]$/.exec(name)?.[1];
    if (key === undefined) continue;
    if (typeof value !== "string")
      throw new ValidationFailed([
        { loc: ["query", name], msg: "Input should be a valid string", type: "string_type", input: value },
      ]);
    filter[key] = value;
  }
  return filter;
}

/** The model a completion names (as the provider answered) is the one asked for, or a dated snapshot of it (`gpt-4o-2024-08-06`). */
const isModel = (answered: string, asked: string) =>
  answered === asked || (answered.startsWith(`${asked}-`) && /^\d/.test(answered.slice(asked.length + 1)));

/**
 * `GET /api/v1/llm/chat/completions?model&metadata[k]=v&limit&after&order`:
 * the stored completions the principal may read (SpiceDB's LookupResources,
 * never the store's own list), oldest first unless `order=desc`, paged as
 * OpenAI pages lists (`after` a completion id).
 */
export const listCompletions = defineRoute({
  method: "GET",
  path: "/api/v1/llm/chat/completions",
  operationId: "listChatCompletions",
  summary: "The stored completions the principal may read",
  tag: TAG,
  deprecated: DEPRECATED,
  permission: "responses:read",
  query: listCompletionsQuery,
  responses: ok("A page of completions", completionList),
  handler: async (
    { principal, query: q, req },
    deps: { completions: CompletionStore; authorization: ResourceAuthorization },
  ) => {
    const metadata = metadataFilter(req.query as Record<string, unknown>);
    const ids: string[] = [];
    let after: string | undefined;
    let more = true;
    while (more && ids.length < MAX_LISTED_COMPLETIONS) {
      const page = await deps.authorization.lookup(principal, "completion", "reader", {
        limit: LOOKUP_PAGE,
        after,
      });
      ids.push(...page.resourceIds);
      after = page.resourceIds.at(-1);
      more = page.more && after !== undefined;
    }
    const completions = (await deps.completions.getMany(principal.org, ids.slice(0, MAX_LISTED_COMPLETIONS)))
      .filter((c) => q.model === undefined || isModel(c.model, q.model))
      .filter((c) => Object.entries(metadata).every(([k, v]) => c.metadata[k] === v))
      .sort((a, b) => a.created - b.created || a.id.localeCompare(b.id));
    const page = pageOf(completions, q);
    if (!page) throw unknownAfter(q.after);
    return listBody(page.items, page.hasMore || more);
  },
});
