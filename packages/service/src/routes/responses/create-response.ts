import { requirePermission } from "@gw/core/http";
import { validate } from "@gw/core/validation";
import type { Router } from "express";
import { budgetHeaders } from "../../budgets/headers.ts";
import { abortOnClose, callerOf } from "../../calls/http.ts";
import { replayResponse } from "../../responses/hosted-mcp.ts";
import { createResponseBody } from "../../responses/request.ts";
import { streamTurn } from "../../responses/stream.ts";
import { type ResponseTurnDeps, startTurn } from "../../responses/turn.ts";
import { withoutNulls } from "../../schema.ts";

export type CreateResponseDeps = ResponseTurnDeps;

/**
 * `POST /api/v1/llm/responses`: one turn with the model (see `startTurn`), as
 * JSON or as a stream of Responses events, with the budget windows'
 * rate-limit headers. Provider failures are errors with their catalogue
 * code: the error middleware answers them (before a stream's first byte;
 * after it, `response.failed` ends the stream).
 */
export function registerCreateResponse(router: Router, deps: CreateResponseDeps): void {
  router.post("/llm/responses", requirePermission("responses:write"), async (req, res) => {
    const input = validate("body", createResponseBody, withoutNulls(req.body));
    const turn = await startTurn(deps, callerOf(req, res), input);
    res.set(budgetHeaders(turn.windows));
    const signal = abortOnClose(res); // the caller going away stops the model's work
    if (input.stream && turn.replayed) replayResponse(res, await turn.answer(signal));
    else if (input.stream)
      await turn.stream(
        () =>
          streamTurn(res, {
            ...deps,
            response: turn.response,
            request: turn.request,
            signal,
            obfuscate: input.stream_options?.include_obfuscation === true,
          }),
        signal,
      );
    else res.json(await turn.answer(signal));
  });
}
