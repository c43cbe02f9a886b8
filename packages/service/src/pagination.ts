import { ValidationFailed } from "@gw/core/errors";
import { queryInt } from "@gw/core/validation";
import { z } from "zod";
import { notSupported } from "./schema.ts";

/** A list's `limit`, 1 to `max` (default `fallback`). */
export const pageLimit = (max: number, fallback: number) =>
  queryInt(z.int().min(1).max(max)).default(fallback);

/** OpenAI's list query: `limit` 1 to 100 (default 20), `after` an item id, `order` (default `desc`, newest first). */
export const pageQuery = z.object({
  limit: pageLimit(100, 20),
  after: z.string().min(1).max(256).optional(),
  order: z.enum(["asc", "desc"]).default("desc"),
  // Extra data on items (logprobs, image URLs…), which this service does not keep.
  include: notSupported("include"),
  "include[]": notSupported("include"),
});

export type PageQuery = z.output<typeof pageQuery>;

/** 422 for an `after` that is not an item of the list. */
export const unknownAfter = (after: string | undefined) =>
  new ValidationFailed([
    { loc: ["query", "after"], msg: "No item with this id in the list", type: "value_error", input: after },
  ]);

/** A page of `items` (oldest first), as `pageQuery` asks; `undefined` when `after` is not among them. */
export function pageOf<T extends { id: string }>(
  items: T[],
  query: PageQuery,
): { items: T[]; hasMore: boolean } | undefined {
  const ordered = query.order === "asc" ? items : [...items].reverse();
  const start = query.after === undefined ? 0 : ordered.findIndex((i) => i.id === query.after) + 1;
  if (start === 0 && query.after !== undefined) return undefined;
  const page = ordered.slice(start, start + query.limit);
  return { items: page, hasMore: start + query.limit < ordered.length };
}

/** OpenAI's list object. */
export const listBody = <T extends { id: string }>(items: T[], hasMore: boolean) => ({
  object: "list" as const,
  data: items,
  first_id: items[0]?.id ?? null,
  last_id: items.at(-1)?.id ?? null,
  has_more: hasMore,
});
