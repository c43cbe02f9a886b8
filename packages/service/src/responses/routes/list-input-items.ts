import type { ResourceAuthorization } from "@gw/core/authz";
import { notFound } from "@gw/core/errors";
import { defineRoute } from "@gw/core/http";
import { roleOn } from "../../http/roles.ts";
import { itemList, ok } from "../../http/schemas.ts";
import { listBody, pageOf, pageQuery, unknownAfter } from "../../pagination.ts";
import type { ResponseStore } from "../store.ts";
import { TAG } from "./schemas.ts";

/**
 * `GET /api/v1/llm/responses/{id}/input_items?limit&after&order`: the items
 * the response was asked with (not the earlier context), paged as OpenAI
 * pages lists; needs reader (asked after the query is validated).
 */
export const listInputItems = defineRoute({
  method: "GET",
  path: "/api/v1/llm/responses/:id/input_items",
  operationId: "listResponseInputItems",
  summary: "The items a response was asked with (reader)",
  tag: TAG,
  permission: "responses:read",
  query: pageQuery,
  responses: ok("A page of items", itemList),
  errors: ["not_found"],
  handler: async (
    { principal, params, query },
    deps: { responses: ResponseStore; authorization: ResourceAuthorization },
  ) => {
    await roleOn("response", "reader")({ principal, params }, deps);
    const input = await deps.responses.input(principal.org, params.id!);
    if (!input) throw notFound(`No response ${params.id}`);
    const page = pageOf(input, query);
    if (!page) throw unknownAfter(query.after);
    return listBody(page.items, page.hasMore);
  },
});
