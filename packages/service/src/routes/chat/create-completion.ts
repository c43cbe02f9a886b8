import { requirePermission } from "@gw/core/http";
import { validate } from "@gw/core/validation";
import type { Router } from "express";
import { budgetHeaders } from "../../budgets/headers.ts";
import { abortOnClose, callerOf } from "../../calls/http.ts";
import { type CompletionCallDeps, startCompletion } from "../../completions/call.ts";
import { createCompletionBody } from "../../completions/request.ts";
import { streamCompletion } from "../../completions/stream.ts";
import { withoutNulls } from "../../schema.ts";
import { deprecated } from "./deprecation.ts";

export type CreateCompletionDeps = CompletionCallDeps;

/**
 * `POST /api/v1/llm/chat/completions` (deprecated: see `deprecated`): one
 * call of the model in OpenAI's Chat Completions shape (see
 * `startCompletion`), as JSON or as a stream of chunks, with the budget
 * windows' rate-limit headers.
 */
export function registerCreateCompletion(router: Router, deps: CreateCompletionDeps): void {
  router.post("/llm/chat/completions", deprecated, requirePermission("responses:write"), async (req, res) => {
    const input = validate("body", createCompletionBody, withoutNulls(req.body));
    const call = await startCompletion(deps, callerOf(req, res), input);
    res.set(budgetHeaders(call.windows));
    const signal = abortOnClose(res); // the caller going away stops the model's work
    if (input.stream)
      await call.stream(
        () =>
          streamCompletion(res, {
            ...deps,
            request: call.request,
            id: call.id,
            created: call.created,
            includeUsage: input.stream_options?.include_usage === true,
            obfuscate: input.stream_options?.include_obfuscation === true,
            signal,
          }),
        signal,
      );
    else res.json(await call.answer(signal));
  });
}
