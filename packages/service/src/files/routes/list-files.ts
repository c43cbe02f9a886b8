import { defineRoute } from "@gw/core/http";
import { z } from "zod";
import { ok } from "../../http/schemas.ts";
import { listBody, pageLimit, pageOf, pageQuery, unknownAfter } from "../../pagination.ts";
import { type FileRouteDeps, TAG } from "./deps.ts";
import { fileList } from "./schemas.ts";

/** Readable files looked at for one list at most (OpenAI's largest page); beyond them the list is cut (and says `has_more`). */
export const MAX_LISTED_FILES = 10_000;
// SpiceDB takes at most 1000 per call, and `lookup` asks for one more than its page.
const LOOKUP_PAGE = 999;

// As OpenAI's list of files: up to 10,000 at once, all of them by default.
export const listFilesQuery = pageQuery.omit({ include: true, "include[]": true }).extend({
  limit: pageLimit(MAX_LISTED_FILES, MAX_LISTED_FILES),
  purpose: z.string().min(1).max(64).optional(),
});

/**
 * `GET /api/v1/llm/files?purpose&limit&after&order`: the files the principal
 * may read (SpiceDB's LookupResources, never the store's own list: files
 * shared with it included), newest first unless `order=asc`, paged as OpenAI
 * pages lists (`after` a file id).
 */
export const listFiles = defineRoute({
  method: "GET",
  path: "/api/v1/llm/files",
  operationId: "listFiles",
  summary: "The files the principal may read",
  tag: TAG,
  permission: "files:read",
  query: listFilesQuery,
  responses: ok("A page of files", fileList),
  handler: async ({ principal, query: q }, deps: FileRouteDeps) => {
    const ids: string[] = [];
    let after: string | undefined;
    let more = true;
    while (more && ids.length < MAX_LISTED_FILES) {
      const page = await deps.authorization.lookup(principal, "file", "reader", {
        limit: LOOKUP_PAGE,
        after,
      });
      ids.push(...page.resourceIds);
      after = page.resourceIds.at(-1);
      more = page.more && after !== undefined;
    }
    const files = (await deps.files.getMany(principal.org, ids.slice(0, MAX_LISTED_FILES)))
      .filter((f) => q.purpose === undefined || f.purpose === q.purpose)
      .sort((a, b) => a.created_at - b.created_at || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0))
      .map(({ contentType: _type, ...object }) => object);
    const page = pageOf(files, q);
    if (!page) throw unknownAfter(q.after);
    return listBody(page.items, page.hasMore || more);
  },
});
