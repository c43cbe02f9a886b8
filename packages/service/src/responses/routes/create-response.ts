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
import { createBackground } from "../background/create.ts";
import type { BackgroundResponses } from "../background/index.ts";
import { createResponseBody } from "../request.ts";
import type { ResponseTurnDeps } from "../response-turn.ts";
import { streamTurn } from "../stream.ts";
import { startTurn } from "../turn.ts";
import { streamEvents } from "./background-events.ts";
import { response, TAG } from "./schemas.ts";

export type CreateResponseDeps = ResponseTurnDeps & { background?: BackgroundResponses | undefined };

/**
 * `POST /api/v1/llm/responses`: one turn with the model (see `startTurn`), as
 * JSON or as a stream of Responses events, with the budget windows'
 * rate-limit headers. Provider failures are errors with their catalogue
 * code: the error middleware answers them (before a stream's first byte;
 * after it, `response.failed` ends the stream).
 */
export const createResponse = modelRoute({
  guardrails: true,
  method: "POST",
  path: "/api/v1/llm/responses",
  operationId: "createResponse",
  summary: "One turn with the model, as JSON or (`stream: true`) as server-sent events",
  description:
    "The principal owns the new `resp_…` (unless `store` is false). Earlier context comes from `conversation` (writer) or `previous_response_id` (reader).",
  tag: TAG,
  permission: MODEL_CALLS,
  body: createResponseBody,
  bodyValidation: { prepare: withoutNulls },
  responses: {
    200: {
      headers: CACHE_HEADER_DOC,
      description: "The response object, or its events when streaming",
      schema: response,
      alternatives: { "text/event-stream": stringSchema("Responses API events") },
    },
  },
  errors: [
    "bad_request",
    "background_limit_exceeded",
    "guardrail_blocked",
    "not_found",
    "conflict",
    "provider_rate_limited",
    "bad_gateway",
    "gateway_timeout",
  ],
  handler: async ({ body: input, caller, res }, deps: CreateResponseDeps) => {
    // Queued and answered at once; the turn runs on a worker (responses/background).
    if (input.background) {
      const queued = await createBackground(deps, caller, input);
      if (!input.stream || !deps.background) return queued;
      await streamEvents(deps.background, queued.id, -1, res);
      return undefined;
    }
    const turn = await startTurn(deps, caller, input);
    res.set(budgetHeaders(turn.windows)).set(cacheHeaders(turn.cache));
    const signal = abortOnClose(res); // the caller going away stops the model's work
    if (input.stream && turn.streamLive) {
      await turn.streamLive(eventSinkOf(res), signal, () => res.set(guardrailHeaders(turn.redactedBy())));
    } else if (input.stream) {
      // A stream's headers leave before its output is checked: only the input's redactions can be named.
      res.set(guardrailHeaders(turn.redactedBy()));
      await turn.stream(
        () =>
          streamTurn(eventSinkOf(res), {
            ...deps,
            provider: turn.provider,
            response: turn.response,
            request: turn.request,
            signal,
            obfuscate: input.stream_options?.include_obfuscation === true,
            fileSearch: turn.fileSearch,
          }),
        signal,
      );
    } else {
      const answered = await turn.answer(signal);
      res.set(guardrailHeaders(turn.redactedBy())).json(answered);
    }
  },
});
