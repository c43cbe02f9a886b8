import { notFound } from "@gw/core/errors";
import { defineRoute } from "@gw/core/http";
import { z } from "zod";
import { itemList, ok } from "../../http/schemas.ts";
import { inputItem, toItems } from "../../items/input.ts";
import { listBody } from "../../pagination.ts";
import { notSupported, withoutNulls } from "../../schema.ts";
import { type ConversationRouteDeps, conversationRole, TAG } from "./deps.ts";

/** Items added at once at most, as OpenAI takes them. */
export const MAX_NEW_ITEMS = 20;

export const addItemsBody = z.strictObject({ items: z.array(inputItem).min(1).max(MAX_NEW_ITEMS) });
export const addItemsQuery = z.object({
  include: notSupported("include"),
  "include[]": notSupported("include"),
});

/**
 * `POST /api/v1/llm/conversations/{id}/items` `{items}` → the added items as a
 * list, with their new ids, appended in order; needs writer.
 */
export const addItems = defineRoute({
  method: "POST",
  path: "/api/v1/llm/conversations/:id/items",
  operationId: "addConversationItems",
  summary: "Append up to 20 items to a conversation (writer)",
  tag: TAG,
  permission: "conversations:write",
  query: addItemsQuery,
  body: addItemsBody,
  bodyValidation: { prepare: withoutNulls },
  responses: ok("The added items, with their ids", itemList),
  errors: ["not_found"],
  authorize: conversationRole("writer"),
  handler: async ({ principal, params, body }, deps: ConversationRouteDeps) => {
    const items = toItems(body.items, deps.ids);
    if (!(await deps.conversations.append(principal.org, params.id!, items)))
      throw notFound(`No conversation ${params.id}`);
    return listBody(items, false);
  },
});
