import { defineRoute } from "@gw/core/http";
import { objectSchema } from "@gw/core/openapi";
import { ok } from "../../http/schemas.ts";
import { countPromptTokens } from "../../llm/tokens.ts";
import { withoutNulls } from "../../schema.ts";
import { prepareTurn, type TurnDeps } from "../prepare-turn.ts";
import { createResponseBody } from "../request.ts";
import { TAG } from "./schemas.ts";

/**
 * `POST /api/v1/llm/responses/input_tokens` (the SDKs' `responses.inputTokens.count`):
 * the tokens a response with this body would send to the model, counted as
 * token budgets count them, over exactly what it would send (instructions,
 * the earlier items that fit, the input, the tools, a `text.format` schema):
 * the tokenizer's count, or an upper bound for what it cannot count cheaply
 * (`llm/tokens.ts`), never holding other requests up: a large one is
 * counted by a worker thread, in the organization's turn. Checked as creating
 * it is (reader is enough on a conversation); nothing is created and the
 * model is not called.
 */
export const countInputTokens = defineRoute({
  method: "POST",
  path: "/api/v1/llm/responses/input_tokens",
  operationId: "countResponseInputTokens",
  summary: "Count the tokens a response with this body would send to the model; nothing is created",
  tag: TAG,
  permission: "responses:read",
  body: createResponseBody,
  bodyValidation: { prepare: withoutNulls },
  responses: ok(
    "The count",
    objectSchema({
      object: { type: "string", const: "response.input_tokens" },
      input_tokens: { type: "integer" },
    }),
  ),
  errors: ["bad_request", "not_found"],
  handler: async ({ principal, body }, deps: TurnDeps) => {
    const { request } = await prepareTurn(deps, principal, body, "reader");
    return { object: "response.input_tokens", input_tokens: await countPromptTokens(request, principal.org) };
  },
});
