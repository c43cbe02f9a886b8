import { principalOf, requirePermission } from "@gw/core/http";
import { validate } from "@gw/core/validation";
import type { Router } from "express";
import { countPromptTokens } from "../../llm/tokens.ts";
import { prepareTurn, type TurnDeps } from "../../responses/prepare-turn.ts";
import { createResponseBody } from "../../responses/request.ts";
import { withoutNulls } from "../../schema.ts";

/**
 * `POST /api/v1/llm/responses/input_tokens` (the SDKs' `responses.inputTokens.count`):
 * the tokens a response with this body would send to the model, counted as
 * token budgets count them, over exactly what it would send (instructions,
 * the earlier items that fit, the input, the tools, a `text.format` schema):
 * the tokenizer's count, or an upper bound for what it cannot count cheaply
 * (`llm/tokens.ts`), never holding other requests up. Checked as creating
 * it is (reader is enough on a conversation); nothing is created and the
 * model is not called.
 */
export function registerCountInputTokens(router: Router, deps: TurnDeps): void {
  router.post("/llm/responses/input_tokens", requirePermission("responses:read"), async (req, res) => {
    const input = validate("body", createResponseBody, withoutNulls(req.body));
    const { request } = await prepareTurn(deps, principalOf(res), input, "reader");
    res.json({ object: "response.input_tokens", input_tokens: await countPromptTokens(request) });
  });
}
