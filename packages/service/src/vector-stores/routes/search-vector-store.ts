import { forbidden } from "@gw/core/errors";
import { objectSchema, stringSchema } from "@gw/core/openapi";
import { MODEL_CALLS } from "@gw/core/permissions";
import { z } from "zod";
import { abortOnClose } from "../../http/model-call.ts";
import { modelRoute } from "../../http/model-route.ts";
import { nullable, ok } from "../../http/schemas.ts";
import { chosen, notSupported, withoutNulls } from "../../schema.ts";
import { searchVectorStores, type VectorSearchDeps, type VectorSearchResult } from "../search.ts";
import {
  attributeFilter,
  DEFAULT_NUM_RESULTS,
  MAX_QUERIES,
  MAX_QUERY_CHARS,
  maxNumResults,
  rankingOptions,
} from "../search-request.ts";

const query = z.string().min(1).max(MAX_QUERY_CHARS);
const queries = z.array(query).min(1).max(MAX_QUERIES);

/** The body of `POST /vector_stores/{id}/search`, as OpenAI's `VectorStoreSearchRequest`. */
export const searchVectorStoreBody = z.strictObject({
  // One branch by the value's kind: a list of 17 says "at most 16", not "Invalid input".
  query: chosen((v) => (Array.isArray(v) ? queries : query)),
  max_num_results: maxNumResults.default(DEFAULT_NUM_RESULTS),
  filters: attributeFilter.optional(),
  ranking_options: rankingOptions.optional(),
  // A query rewritten by a model is not searched here: `true` is refused rather than ignored.
  rewrite_query: notSupported("rewrite_query: true (a query rewritten by a model)", (v) => v === false),
});

/** One result, as OpenAI's `VectorStoreSearchResultItem`. */
const searchResult = objectSchema({
  file_id: stringSchema("`file_…`"),
  filename: stringSchema(),
  score: { type: "number", minimum: 0, maximum: 1, description: "Cosine similarity to the query" },
  attributes: { type: ["object", "null"], additionalProperties: { type: ["string", "number", "boolean"] } },
  content: {
    type: "array",
    items: objectSchema({ type: { type: "string", const: "text" }, text: stringSchema() }),
  },
});

/** OpenAI's `VectorStoreSearchResultsPage`: every result at once (`has_more` is always false). */
export const searchResultsPage = objectSchema({
  object: { type: "string", const: "vector_store.search_results.page" },
  search_query: { type: "array", items: stringSchema() },
  data: { type: "array", items: searchResult },
  has_more: { type: "boolean" },
  next_page: nullable("string"),
});

/** A result as the search page shows it. */
export const searchResultItem = (result: VectorSearchResult) => ({
  file_id: result.fileId,
  filename: result.filename,
  score: result.score,
  attributes: result.attributes,
  content: [{ type: "text" as const, text: result.text }],
});

/**
 * `POST /api/v1/llm/vector_stores/{id}/search`: the chunks of the store
 * nearest the query, only of files the principal may read at this moment,
 * `max_num_results` of them whenever that many exist (see `searchVectorStores`).
 * Needs reader on the store (else 404); the query's embedding is a model call
 * charged to the key, so the key needs `responses:write` too (else 403, nothing embedded).
 */
export const searchVectorStore = modelRoute({
  method: "POST",
  path: "/api/v1/llm/vector_stores/:id/search",
  operationId: "searchVectorStore",
  summary: "Search a vector store: only chunks of files the principal may read (reader on the store)",
  tag: "Vector stores",
  permission: "vector_stores:read",
  body: searchVectorStoreBody,
  bodyValidation: { prepare: withoutNulls },
  responses: ok("The readable chunks nearest the query, best first", searchResultsPage),
  errors: ["forbidden", "not_found", "provider_rate_limited", "bad_gateway", "gateway_timeout"],
  handler: async ({ params, body, caller, res }, deps: VectorSearchDeps) => {
    // The query's embedding is a model call, which needs what every model call needs.
    if (!caller.principal.permissions.includes(MODEL_CALLS))
      throw forbidden(
        `This credential lacks the '${MODEL_CALLS}' permission, which the query's embedding needs`,
        {
          reason: "missing_permission",
        },
      );
    const queries = typeof body.query === "string" ? [body.query] : body.query;
    const results = await searchVectorStores(
      deps,
      caller,
      {
        vectorStoreIds: [String(params.id)],
        queries,
        maxResults: body.max_num_results,
        filter: body.filters,
        scoreThreshold: body.ranking_options?.score_threshold,
      },
      abortOnClose(res),
    );
    return {
      object: "vector_store.search_results.page",
      search_query: queries,
      data: results.map(searchResultItem),
      has_more: false,
      next_page: null,
    };
  },
});
