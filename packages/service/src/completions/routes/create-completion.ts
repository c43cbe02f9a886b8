import { GuardrailBlocked } from "@gw/core/errors";
import { stringSchema } from "@gw/core/openapi";
import { MODEL_CALLS } from "@gw/core/permissions";
import { budgetHeaders } from "../../budgets/headers.ts";
import {
  abortOnClose,
  CACHE_HEADER_DOC,
  cacheHeaders,
  eventSinkOf,
  guardrailHeaders,
} from "../../http/model-call.ts";
import { modelRoute } from "../../http/model-route.ts";
import { withoutNulls } from "../../schema.ts";
import { type CompletionCallDeps, startCompletion } from "../call.ts";
import { createCompletionBody } from "../request.ts";
import { streamCompletion } from "../stream.ts";
import { DEPRECATED, TAG } from "./deprecation.ts";
import { completion } from "./schemas.ts";

export type CreateCompletionDeps = CompletionCallDeps;

/**
 * `POST /api/v1/llm/chat/completions` (deprecated: see `DEPRECATED`): one
 * call of the model in OpenAI's Chat Completions shape (see
 * `startCompletion`), as JSON or as a stream of chunks, with the budget
 * windows' rate-limit headers.
 */
export const createCompletion = modelRoute({
  guardrails: true,
  method: "POST",
  path: "/api/v1/llm/chat/completions",
  operationId: "createChatCompletion",
  summary: "One call of the model in OpenAI's Chat Completions shape (deprecated: use responses)",
  description:
    "With `store: true` the principal owns the new `chatcmpl-…` id as a `completion` resource and the completion is kept with its messages.",
  tag: TAG,
  deprecated: DEPRECATED,
  permission: MODEL_CALLS,
  body: createCompletionBody,
  bodyValidation: { prepare: withoutNulls },
  responses: {
    200: {
      headers: CACHE_HEADER_DOC,
      description: "The chat completion, or its chunks when streaming",
      schema: completion,
      alternatives: { "text/event-stream": stringSchema("chat.completion.chunk events, then [DONE]") },
    },
  },
  errors: [
    "bad_request",
    "guardrail_blocked",
    "not_found",
    "provider_rate_limited",
    "bad_gateway",
    "gateway_timeout",
  ],
  handler: async ({ body: input, caller, res }, deps: CreateCompletionDeps) => {
    const call = await startCompletion(deps, caller, input).catch((err: unknown) => {
      // What a guardrail blocked is in `messages` here.
      if (err instanceof GuardrailBlocked) err.field = "messages";
      throw err;
    });
    res.set(budgetHeaders(call.windows)).set(cacheHeaders(call.cache));
    const signal = abortOnClose(res); // the caller going away stops the model's work
    if (input.stream) {
      // A stream's headers leave before its output is checked: only the input's redactions can be named.
      res.set(guardrailHeaders(call.redactedBy()));
      await call.stream(
        () =>
          streamCompletion(eventSinkOf(res), {
            ...deps,
            provider: call.provider,
            request: call.request,
            id: call.id,
            created: call.created,
            includeUsage: input.stream_options?.include_usage === true,
            obfuscate: input.stream_options?.include_obfuscation === true,
            signal,
          }),
        signal,
      );
    } else {
      const answered = await call.answer(signal);
      res.set(guardrailHeaders(call.redactedBy())).json(answered);
    }
  },
});
