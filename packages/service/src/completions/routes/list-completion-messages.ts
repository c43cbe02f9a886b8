import type { ResourceAuthorization } from "@gw/core/authz";
import { notFound } from "@gw/core/errors";
import { defineRoute } from "@gw/core/http";
import { z } from "zod";
import { roleOn } from "../../http/roles.ts";
import { ok } from "../../http/schemas.ts";
import { listBody, pageOf, pageQuery, unknownAfter } from "../../pagination.ts";
import type { CompletionStore } from "../store.ts";
import { DEPRECATED, TAG } from "./deprecation.ts";
import { messageList } from "./schemas.ts";

/** OpenAI lists a completion's messages oldest first unless told otherwise. */
export const completionMessagesQuery = pageQuery.extend({ order: z.enum(["asc", "desc"]).default("asc") });

/** `GET /api/v1/llm/chat/completions/{id}/messages?limit&after&order`: the messages it was asked with; needs reader. */
export const listCompletionMessages = defineRoute({
  method: "GET",
  path: "/api/v1/llm/chat/completions/:id/messages",
  operationId: "listChatCompletionMessages",
  summary: "The messages a stored completion was asked with (reader)",
  tag: TAG,
  deprecated: DEPRECATED,
  permission: "responses:read",
  query: completionMessagesQuery,
  responses: ok("A page of messages", messageList),
  errors: ["not_found"],
  handler: async (
    { principal, params, query },
    deps: { completions: CompletionStore; authorization: ResourceAuthorization },
  ) => {
    await roleOn("completion", "reader")({ principal, params }, deps);
    const messages = await deps.completions.messages(principal.org, params.id!);
    if (!messages) throw notFound(`No completion ${params.id}`);
    const page = pageOf(messages, query);
    if (!page) throw unknownAfter(query.after);
    return listBody(page.items, page.hasMore);
  },
});
