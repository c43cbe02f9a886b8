import { notFound } from "@gw/core/errors";
import { defineRoute } from "@gw/core/http";
import { itemList, ok } from "../../http/schemas.ts";
import { listBody, pageQuery, unknownAfter } from "../../pagination.ts";
import { type ConversationRouteDeps, conversationRole, TAG } from "./deps.ts";

/**
 * `GET /api/v1/llm/conversations/{id}/items?limit&after&order`: a page of its
 * items, as OpenAI pages them (`limit` 1 to 100, default 20; `after` an item
 * id; `order` `desc` by default, newest first); needs reader. The query is
 * validated before the role is asked.
 */
export const listItems = defineRoute({
  method: "GET",
  path: "/api/v1/llm/conversations/:id/items",
  operationId: "listConversationItems",
  summary: "A page of a conversation's items (reader)",
  tag: TAG,
  permission: "conversations:read",
  query: pageQuery,
  responses: ok("A page of items", itemList),
  errors: ["not_found"],
  handler: async ({ principal, params, query }, deps: ConversationRouteDeps) => {
    await conversationRole("reader")({ principal, params }, deps);
    const page = await deps.conversations.page(principal.org, params.id!, query);
    if (page === null) throw notFound(`No conversation ${params.id}`);
    if (!page) throw unknownAfter(query.after);
    return listBody(page.items, page.hasMore);
  },
});
