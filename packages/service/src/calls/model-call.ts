import type { ResourceAuthorization, ResourceRef } from "@gw/core/authz";
import { AppError } from "@gw/core/errors";
import type { Logger } from "@gw/core/logger";
import type { Principal } from "@gw/core/principal";
import type { Response } from "express";
import { type AdmittedCall, admitModelCall, type BudgetDeps } from "../budgets/admit-model-call.ts";
import {
  type ChatProvider,
  type ChatRequest,
  type Completion,
  type ToolCallDelta,
  type Usage,
  usageOf,
} from "../llm/provider.ts";
import type { UsageStore } from "../usage/store.ts";

/**
 * One call of the model as every model-calling endpoint (responses, chat
 * completions) makes it: admit (budgets reserved before anything is created
 * or sent) → create the ownership of what will be kept → call, as JSON or as
 * a stream → settle the budgets once with what the model used → keep the
 * answer (store, record usage) → on any failure give back what was taken.
 */

export interface ModelCallDeps {
  provider: ChatProvider;
  authorization: ResourceAuthorization;
  usage: UsageStore;
  budgets: BudgetDeps;
}

/** What a stream writer reports once the model finished, or once the stream broke after it began. */
export interface StreamedCall {
  /** The model's answer, when it finished. */
  completion?: Completion;
  /** What the model produced before the stream broke (its text and tool call arguments). */
  partial?: string;
  /** Sends the stream's last events (the kept answer) and ends it. */
  end(): void;
  /** Ends the stream with an error event. */
  fail(err: unknown): void;
}

export interface CallPlan<A, S extends StreamedCall> {
  principal: Principal;
  request: ChatRequest;
  /** The resource the principal owns once the answer is kept; none when nothing is kept (`store: false`). */
  owned: ResourceRef | undefined;
  /**
   * Keeps the model's answer (stores it, records its usage) and returns it as
   * the client sees it; for a stream, with what the stream writer reported.
   */
  keep(completion: Completion, streamed?: S): Promise<A>;
}

/** An admitted call: run it once, as JSON (`answer`) or as a stream (`stream`). */
export interface AdmittedModelCall<A, S extends StreamedCall> {
  /** Calls the model and keeps its answer; failures throw (nothing is kept, budgets and ownership given back). */
  answer(signal: AbortSignal): Promise<A>;
  /**
   * Streams the call through `start` (which calls the model and writes the
   * stream). Failures before the first byte throw, with everything given
   * back; after it the stream ends with its error event and what the model
   * produced is still charged and recorded.
   */
  stream(start: () => Promise<S>): Promise<void>;
}

/**
 * Admits `plan.request` under the principal's budgets (429 refused, rate-limit
 * headers set on `res`) and caps its output as admitted.
 */
export async function admitCall<A, S extends StreamedCall>(
  deps: ModelCallDeps,
  res: Response,
  plan: CallPlan<A, S>,
): Promise<AdmittedModelCall<A, S>> {
  const admitted = await admitModelCall(deps.budgets, res, plan.request);
  plan.request.maxOutputTokens = admitted.maxOutputTokens;
  return {
    answer: (signal) => answer(deps, plan, admitted, signal),
    stream: (start) => stream(deps, plan, admitted, start),
  };
}

async function answer<A, S extends StreamedCall>(
  deps: ModelCallDeps,
  plan: CallPlan<A, S>,
  admitted: AdmittedCall,
  signal: AbortSignal,
): Promise<A> {
  await own(deps, plan, admitted);
  let completion: Completion;
  try {
    completion = await deps.provider.complete(plan.request, signal);
  } catch (err) {
    await Promise.all([admitted.release(), disown(deps, plan)]);
    throw err;
  }
  await admitted.settle(usedBy(completion));
  try {
    return await plan.keep(completion);
  } catch (err) {
    // Not kept (PostgreSQL away…): its id must not keep an owner relationship that nothing will ever sweep.
    await disown(deps, plan);
    throw err;
  }
}

async function stream<A, S extends StreamedCall>(
  deps: ModelCallDeps,
  plan: CallPlan<A, S>,
  admitted: AdmittedCall,
  start: () => Promise<S>,
): Promise<void> {
  await own(deps, plan, admitted);
  let streamed: S;
  try {
    streamed = await start();
  } catch (err) {
    // failed before the first byte: an ordinary error answer
    await Promise.all([admitted.release(), disown(deps, plan)]);
    throw err;
  }
  if (streamed.completion) {
    await admitted.settle(usedBy(streamed.completion));
    try {
      await plan.keep(streamed.completion, streamed); // kept before the client hears the end
    } catch (err) {
      streamed.fail(err);
      await disown(deps, plan);
      return;
    }
    streamed.end();
    return;
  }
  // The stream broke after it began: what the model produced still counts, nothing was kept.
  await settlePartial(deps.usage, admitted, plan.principal, plan.request, streamed.partial);
  await disown(deps, plan);
}

/** Creates the ownership of what will be kept; if that fails, the reservation goes back. */
async function own(deps: ModelCallDeps, plan: CallPlan<unknown, StreamedCall>, admitted: AdmittedCall) {
  try {
    if (plan.owned) await deps.authorization.createOwnership(plan.principal, plan.owned);
  } catch (err) {
    await admitted.release();
    throw err;
  }
}

/** Gives up the id of what was never kept (best effort). */
function disown(deps: ModelCallDeps, plan: CallPlan<unknown, StreamedCall>): Promise<void> {
  return plan.owned ? releaseOwnership(deps.authorization, plan.principal, plan.owned) : Promise.resolve();
}

/** A signal aborted when the caller goes away before the answer is finished: that stops the model's work. */
export function abortOnClose(res: Response): AbortSignal {
  const abort = new AbortController();
  res.on("close", () => {
    if (!res.writableFinished) abort.abort(new Error("client disconnected"));
  });
  return abort.signal;
}

/**
 * Records one model call's tokens for the principal: its organization, key
 * and end user; priced as the model that was asked for (`pricedAs`: the
 * provider may answer with a dated name), cached input at its own price.
 */
export function recordUsage(
  store: UsageStore,
  principal: Principal,
  model: string,
  usage: Usage,
  pricing: { cachedTokens?: number; pricedAs?: string } = {},
): Promise<void> {
  return store.record({
    org: principal.org,
    keyId: principal.keyId,
    user: principal.user,
    model,
    usage,
    ...pricing,
  });
}

/** What a completion used, as budgets settle it. */
export const usedBy = (completion: Completion) => ({
  ...completion.usage,
  cached_tokens: completion.usageDetails.cachedTokens,
});

/**
 * A stream cut midway: what the model produced is charged to the budgets and
 * recorded as usage (estimated: the provider sent no usage); nothing produced,
 * the reservation is given back.
 */
export async function settlePartial(
  store: UsageStore,
  admitted: AdmittedCall,
  principal: Principal,
  request: ChatRequest,
  partial: string | undefined,
): Promise<void> {
  if (!partial) return admitted.release();
  const usage = usageOf(undefined, request.messages, partial);
  await Promise.all([admitted.settle(usage), recordUsage(store, principal, request.model, usage)]);
}

/** Gives up the id of a resource made for a call whose result was never kept (best effort). */
export function releaseOwnership(
  authorization: ResourceAuthorization,
  principal: Principal,
  resource: ResourceRef,
): Promise<void> {
  return authorization.deleteResource(principal, resource).then(
    () => undefined,
    () => undefined,
  );
}

/** Logs a stream that failed after it began: a catalogue error as a warning, anything else as an error. */
export function logStreamFailure(logger: Logger, res: Response, err: unknown, what: string): void {
  if (err instanceof AppError) logger.warn({ requestId: res.req.id, err }, `${what} stream failed`);
  else logger.error({ requestId: res.req.id, err }, `${what} stream failed`);
}

/** Opens a server-sent event stream: 200, no caching, no proxy buffering, the headers sent at once. */
export function openEventStream(res: Response): void {
  res
    .status(200)
    .set({ "Content-Type": "text/event-stream", "Cache-Control": "no-cache", "X-Accel-Buffering": "no" });
  res.flushHeaders();
}

/**
 * Hands each piece of a model's stream, from `first` on, to `text` or
 * `toolCall` until the provider is done, and returns its completion; if the
 * stream breaks, the error and what the model had produced by then (its text
 * and tool call arguments), which is still charged.
 */
export async function relayPieces(
  first: IteratorResult<string | ToolCallDelta, Completion>,
  pieces: AsyncGenerator<string | ToolCallDelta, Completion>,
  on: { text(piece: string): void; toolCall(piece: ToolCallDelta): void },
): Promise<{ completion: Completion } | { error: unknown; produced: string }> {
  let produced = "";
  try {
    let step = first;
    while (!step.done) {
      const piece = step.value;
      if (typeof piece === "string") {
        produced += piece;
        on.text(piece);
      } else {
        produced += piece.arguments;
        on.toolCall(piece);
      }
      step = await pieces.next();
    }
    return { completion: step.value };
  } catch (error) {
    return { error, produced };
  }
}
