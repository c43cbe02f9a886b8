import type { Clock } from "@gw/core/clock";
import type { Logger } from "@gw/core/logger";
import type { Principal } from "@gw/core/principal";
import type { WindowState } from "@gw/core/windows";
import type { Caller } from "../budgets/admit-model-call.ts";
import { admitCall, type ModelCallDeps, recordUsageSoon } from "../calls/model-call.ts";
import type { CacheResult } from "../calls/response-cache.ts";
import type { Ids } from "../ids.ts";
import { routeOf } from "../llm/models.ts";
import type { ChatProvider, ChatRequest, Completion } from "../llm/provider.ts";
import { completionObject, storedMessages } from "./completion.ts";
import { type CreateCompletionInput, chatRequestOf } from "./request.ts";
import type { ChatCompletionObject, CompletionStore } from "./store.ts";
import type { StreamedCompletion } from "./stream.ts";

export interface CompletionCallDeps extends ModelCallDeps {
  logger: Logger;
  completions: CompletionStore;
  /** The process's clock: a completion's `created`. */
  clock: Clock;
  /** Its ids, stamped with the clock's time. */
  ids: Ids;
}

/** A chat completion checked and admitted: run it once, as JSON or as a stream of chunks. */
export interface CompletionCall {
  /** The budget windows after admission (the answer's rate-limit headers). */
  windows: WindowState[];
  /** What the response cache did (`X-Gateway-Cache`). */
  cache: CacheResult;
  /** The completion's id and creation time, and the request for the model (what a stream writer needs). */
  id: string;
  created: number;
  request: ChatRequest;
  /** The provider the stream writer streams from: the call's output checked by its guardrails. */
  provider: ChatProvider;
  /** The guardrails that redacted the call's input or output (`x-guardrail-redacted`). */
  redactedBy(): string[];
  /** The model's answer as a `chat.completion`, stored with `store: true`, its usage recorded. */
  answer(signal: AbortSignal): Promise<ChatCompletionObject>;
  /** Streams the completion through `start` (the route's stream writer); it is stored before the last chunk. */
  stream(start: () => Promise<StreamedCompletion>, signal: AbortSignal): Promise<void>;
}

/**
 * One call of the model in OpenAI's Chat Completions shape, with the
 * admission, model allowlist and usage of responses. With `store: true` the
 * principal owns the new `chatcmpl-…` id as a `completion` resource and the
 * completion is kept with its messages.
 */
export async function startCompletion(
  deps: CompletionCallDeps,
  caller: Caller,
  input: CreateCompletionInput,
): Promise<CompletionCall> {
  const { principal } = caller;
  deps.provider.assertConfigured();
  const { model, route } = routeOf(deps.provider, principal, input.model);
  const request: ChatRequest = { ...chatRequestOf(input, model), route };
  const id = deps.ids.newCompletionId();
  const created = Math.floor(deps.clock.wall() / 1000);
  const call = await admitCall<ChatCompletionObject, StreamedCompletion>(deps, {
    caller,
    request,
    owned: input.store ? { type: "completion", id } : undefined,
    keep: async (completion) => {
      const answer = completionObject(id, created, completion, input.metadata ?? {}, request.serviceTier);
      await keep(deps, principal, input, answer, completion);
      return answer;
    },
    discard: () => deps.completions.delete(principal.org, id),
    // A chat completion reads nothing stored: its messages are all it reads.
    reads: { resources: [], stored: false },
  });
  return {
    windows: call.windows,
    cache: call.cache,
    id,
    created,
    request,
    provider: call.provider,
    redactedBy: () => call.redactedBy(),
    answer: (signal) => call.answer(signal),
    stream: (start, signal) => call.stream(start, signal),
  };
}

/** Records the completion's usage and stores it (with `store: true`). */
async function keep(
  deps: CompletionCallDeps,
  principal: Principal,
  input: CreateCompletionInput,
  answer: ChatCompletionObject,
  completion: Completion,
): Promise<void> {
  // Sent before the completion is stored and answered; the answer does not wait for Redis's reply.
  recordUsageSoon(
    deps.usage,
    principal,
    answer.model,
    {
      input_tokens: answer.usage.prompt_tokens,
      output_tokens: answer.usage.completion_tokens,
      total_tokens: answer.usage.total_tokens,
    },
    {
      cachedTokens: completion.usageDetails.cachedTokens,
      servedBy: completion.servedBy,
      cacheHit: completion.cacheHit,
    },
  );
  if (input.store)
    await deps.completions.save(principal.org, answer, storedMessages(answer.id, input.messages));
}
