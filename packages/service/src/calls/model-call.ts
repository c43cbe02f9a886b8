import type { ResourceAuthorization, ResourceRef } from "@gw/core/authz";
import type { Principal } from "@gw/core/principal";
import type { WindowState } from "@gw/core/windows";
import {
  type AdmittedCall,
  admitModelCall,
  type BudgetDeps,
  type Caller,
} from "../budgets/admit-model-call.ts";
import type { ModelPrice } from "../llm/prices.ts";
import type {
  ChatProvider,
  ChatRequest,
  Completion,
  ServedBy,
  ToolCallDelta,
  Usage,
} from "../llm/provider.ts";
import { countTokens } from "../llm/tokens.ts";
import type { UsageEvent, UsageStore } from "../usage/store.ts";
import type { CallGuard, ModelGuardrails } from "./guardrails.ts";
import type { CacheResult, CallReads, ResponseCache } from "./response-cache.ts";

/**
 * One call of the model as everything that calls a model makes it
 * (responses, chat completions, eval runs, and whatever comes next): admit
 * (budgets reserved before anything is created or sent, the output cap set)
 * → create the ownership of what will be kept (for a JSON answer, while the
 * model answers and the answer is kept; for a stream, before it starts) →
 * call, as JSON or as a stream (the provider held to the output cap:
 * llm/output-cap.ts) → settle the budgets once with what the model used,
 * at most what was reserved → keep the answer (store, record usage) → on any failure give
 * back what was taken,
 * or, once the provider had the request (the caller went away, the stream
 * broke), charge and record at least the counted prompt and what was
 * produced. Plain values in and out: the caller (a route, a worker) turns
 * `windows` into headers if it answers over HTTP.
 *
 * Guardrails (calls/guardrails.ts) run first: the input is checked before
 * admission (a block costs nothing), and the output through `provider`, the
 * one the call and its stream writer use.
 */

export interface ModelCallDeps {
  provider: ChatProvider;
  /** Needed by calls that own what they keep (`CallPlan.owned`); an eval worker has none. */
  authorization?: ResourceAuthorization | undefined;
  usage: UsageStore;
  budgets: BudgetDeps;
  /** The guardrails attached to calls; none: no call is checked. */
  modelGuardrails?: ModelGuardrails | undefined;
  /** The response cache (calls/response-cache.ts); none: every call bypasses it. */
  responseCache?: ResponseCache | undefined;
}

/** What a stream writer reports once the model finished, or once the stream broke after it began. */
export interface StreamedCall {
  /** The model's answer, when it finished. */
  completion?: Completion;
  /** What the model produced before the stream broke (its text and tool call arguments). */
  partial?: string;
  /** The deployment the stream came from (`StreamSeen.servedBy`): what broke after it began is priced as it. */
  servedBy?: ServedBy | undefined;
  /** What a stream that broke after it began was charged (its prompt as counted, what was produced): set once charged. */
  charged?: Usage;
  /** Sends the stream's last events (the kept answer) and ends it. */
  end(): void;
  /** Ends the stream with an error event. */
  fail(err: unknown): void;
}

export interface CallPlan<A, S extends StreamedCall> {
  /** Who calls: the principal and its key's limits. */
  caller: Caller;
  request: ChatRequest;
  /** The resource the principal owns once the answer is kept; none when nothing is kept (`store: false`, eval runs). */
  owned: ResourceRef | undefined;
  /**
   * Keeps the model's answer (stores it, records its usage) and returns it as
   * the client sees it; for a stream, with what the stream writer reported.
   */
  keep(completion: Completion, streamed?: S): Promise<A>;
  /**
   * Takes back what `keep` stored, should the ownership of it fail to be
   * written (the compensation of a create: docs/adr/0009-check-and-write-together.md). With it, a JSON
   * answer is kept while its ownership is still being written, not after;
   * without it (a turn appended to a conversation), the answer is kept once
   * the ownership is written.
   */
  discard?(): Promise<void>;
  /**
   * What the call read that is stored (calls/response-cache.ts): a call that
   * says may be answered from the response cache, as its key allows; one
   * that does not (an eval run, a hosted MCP turn) never is.
   */
  reads?: CallReads | undefined;
}

/** An admitted call: run it once, as JSON (`answer`) or as a stream (`stream`). */
export interface AdmittedModelCall<A, S extends StreamedCall> {
  /** The budget windows after the reservation (the answer's rate-limit headers); none without budgets. */
  windows: WindowState[];
  /** What the response cache did for the call: the answer's `X-Gateway-Cache`. */
  cache: CacheResult;
  /** The provider as this call uses it, its output checked by the call's guardrails: a stream writer streams from it. */
  provider: ChatProvider;
  /** The guardrails that redacted the call's input, and (once answered) its output: the `x-guardrail-redacted` header. */
  redactedBy(): string[];
  /**
   * Calls the model and keeps its answer; failures throw (nothing is kept,
   * ownership given back; budgets given back, unless `signal` aborted, the
   * caller gone while the provider worked: then the prompt is charged and
   * recorded).
   */
  answer(signal: AbortSignal): Promise<A>;
  /**
   * Streams the call through `start` (which calls the model with `signal`
   * and writes the stream). Failures before the first byte throw, with
   * everything given back (unless `signal` aborted: as `answer`); after it
   * the stream ends with its error event and the counted prompt and what
   * the model produced are charged and recorded.
   */
  stream(start: () => Promise<S>, signal: AbortSignal): Promise<void>;
  /** Gives the reservation back instead: the caller found, after admission, that it must not call the model. */
  release(): Promise<void>;
  /**
   * The request's messages grew after admission (`AdmittedCall.promptGrew`):
   * checked by the input guardrails again (a block gives the reservation back
   * and throws `GuardrailBlocked`), then charged as counted again.
   */
  promptGrew(): Promise<void>;
}

/** Admits `plan.request` under the caller's budgets (`BudgetRefused`: 429) and caps its output as admitted. */
export async function admitCall<A, S extends StreamedCall>(
  deps: ModelCallDeps,
  plan: CallPlan<A, S>,
): Promise<AdmittedModelCall<A, S>> {
  // A field no deployment of the call can take is refused before anything is checked, reserved or sent.
  deps.provider.assertTakes(plan.request);
  // Before admission: a blocked input reserves, charges and sends nothing.
  const guard = await deps.modelGuardrails?.forCall(plan.caller, plan.request);
  // Keyed on the call as the model will read it (after input redactions) and as the client capped it.
  const cached = await deps.responseCache?.lookup(
    plan.caller.principal,
    plan.caller.cache ?? "default",
    plan.request,
    plan.reads,
  );
  const admitted = await admitModelCall(deps.budgets, plan.caller, plan.request);
  plan.request.maxOutputTokens = admitted.maxOutputTokens;
  // Who calls, for the router: an organization's own provider key is looked up for this principal only.
  const { principal, requestId } = plan.caller;
  plan.request.route = {
    fallbacks: plan.request.route?.fallbacks ?? [],
    caller: { principal, requestId: requestId ?? "" },
  };
  const guarded = guardedDeps(cached ? { ...deps, provider: cached.provider(deps.provider) } : deps, guard);
  return {
    windows: admitted.windows,
    cache: cached?.result ?? "bypass",
    provider: guarded.provider,
    redactedBy: () => [...(guard?.redactedBy ?? [])].sort(),
    answer: (signal) => answer(guarded, plan, admitted, signal),
    stream: (start, signal) => stream(guarded, plan, admitted, start, signal),
    release: () => admitted.release(),
    promptGrew: async () => {
      // What was added (hosted MCP tools' results) is input the model reads: checked before it is charged or sent.
      try {
        await guard?.checkInput(plan.request);
      } catch (err) {
        await admitted.release();
        throw err;
      }
      await admitted.promptGrew();
    },
  };
}

/** The call's deps with its provider's output checked by `guard`. */
function guardedDeps(deps: ModelCallDeps, guard: CallGuard | undefined): ModelCallDeps {
  return guard ? { ...deps, provider: guard.provider(deps.provider) } : deps;
}

async function answer<A, S extends StreamedCall>(
  deps: ModelCallDeps,
  plan: CallPlan<A, S>,
  admitted: AdmittedCall,
  signal: AbortSignal,
): Promise<A> {
  // The ownership is written while the provider answers (not before: one SpiceDB write off the call's
  // latency). If that write fails, the provider call is cut short and what it may have read is charged.
  const ownership = startOwnership(deps, plan);
  const callSignal = ownership ? AbortSignal.any([signal, ownership.failed]) : signal;
  let completion: Completion;
  try {
    completion = await deps.provider.complete(plan.request, callSignal);
  } catch (err) {
    const refused = await ownership?.done;
    await Promise.all([
      callSignal.aborted ? chargeUnreported(deps.usage, admitted, plan, "") : admitted.release(),
      disown(deps, plan),
    ]);
    throw refused ?? err;
  }
  noteOverrun(deps, plan, completion);
  if (ownership && plan.discard)
    return keepWhileOwning(deps, plan, admitted, completion, ownership.done, plan.discard);
  const refused = await ownership?.done;
  if (refused) {
    // The model answered, but what it answered cannot be owned, so it is not kept: still used, so charged.
    await Promise.all([
      admitted.settle(usedBy(completion), completion.servedBy),
      recordUsage(deps.usage, plan.caller.principal, completion.model, completion.usage, {
        cachedTokens: completion.usageDetails.cachedTokens,
        servedBy: completion.servedBy,
        cacheHit: completion.cacheHit,
      }),
      disown(deps, plan),
    ]);
    throw refused;
  }
  await admitted.settle(usedBy(completion), completion.servedBy);
  try {
    return await plan.keep(completion);
  } catch (err) {
    // Not kept (PostgreSQL away…): its id must not keep an owner relationship that nothing will ever sweep.
    await disown(deps, plan);
    throw err;
  }
}

/**
 * Keeps the answer while its ownership is still being written (one write
 * off the call's latency); if the ownership is refused, what was kept is
 * taken back (`discard`), the tokens stay charged (the model answered) and
 * the ownership's error is the call's.
 */
async function keepWhileOwning<A, S extends StreamedCall>(
  deps: ModelCallDeps,
  plan: CallPlan<A, S>,
  admitted: AdmittedCall,
  completion: Completion,
  owned: Promise<unknown>,
  discard: () => Promise<void>,
): Promise<A> {
  await admitted.settle(usedBy(completion), completion.servedBy);
  const [kept, refused] = await Promise.all([
    plan.keep(completion).then(
      (answer) => ({ answer }),
      (error: unknown) => ({ error }),
    ),
    owned,
  ]);
  if (!refused && "answer" in kept) return kept.answer;
  if (refused && "answer" in kept) await discard().catch(() => undefined); // best effort: a row without an owner is never readable
  await disown(deps, plan);
  throw refused ?? (kept as { error: unknown }).error;
}

/**
 * Starts writing the ownership of what the call will keep: `done` gives the
 * error that refused it (undefined once it is written), `failed` aborts
 * then. None when the call keeps nothing.
 */
function startOwnership(
  deps: ModelCallDeps,
  plan: CallPlan<unknown, StreamedCall>,
): { done: Promise<unknown>; failed: AbortSignal } | undefined {
  if (!plan.owned) return undefined;
  const failure = new AbortController();
  const { authorization } = deps;
  const written = authorization
    ? authorization.createOwnership(plan.caller.principal, plan.owned)
    : Promise.reject(new Error("A model call that owns what it keeps needs the authorization"));
  const done = written.then(
    () => undefined,
    (err: unknown) => {
      failure.abort(err);
      return err ?? new Error("the ownership could not be written");
    },
  );
  return { done, failed: failure.signal };
}

async function stream<A, S extends StreamedCall>(
  deps: ModelCallDeps,
  plan: CallPlan<A, S>,
  admitted: AdmittedCall,
  start: () => Promise<S>,
  signal: AbortSignal,
): Promise<void> {
  await own(deps, plan, admitted);
  let streamed: S;
  try {
    streamed = await start();
  } catch (err) {
    // failed before the first byte: an ordinary error answer
    await Promise.all([
      signal.aborted ? chargeUnreported(deps.usage, admitted, plan, "") : admitted.release(),
      disown(deps, plan),
    ]);
    throw err;
  }
  if (streamed.completion) {
    noteOverrun(deps, plan, streamed.completion);
    await admitted.settle(usedBy(streamed.completion), streamed.completion.servedBy);
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
  // The stream broke after it began: the prompt and what the model produced still count, nothing was kept.
  streamed.charged = await chargeUnreported(
    deps.usage,
    admitted,
    plan,
    streamed.partial ?? "",
    streamed.servedBy,
  );
  await disown(deps, plan);
}

/** Creates the ownership of what will be kept; if that fails, the reservation goes back. */
async function own(deps: ModelCallDeps, plan: CallPlan<unknown, StreamedCall>, admitted: AdmittedCall) {
  try {
    if (!plan.owned) return;
    if (!deps.authorization) throw new Error("A model call that owns what it keeps needs the authorization");
    await deps.authorization.createOwnership(plan.caller.principal, plan.owned);
  } catch (err) {
    await admitted.release();
    throw err;
  }
}

/**
 * Logs a provider that went past the output cap it was sent (the answer was
 * cut there, and is charged at most the reservation: llm/output-cap.ts);
 * the provider's metrics count it.
 */
function noteOverrun(deps: ModelCallDeps, plan: CallPlan<unknown, StreamedCall>, completion: Completion) {
  if (!completion.overrun) return;
  const { principal, requestId } = plan.caller;
  deps.budgets.logger.warn(
    {
      requestId,
      org: principal.org,
      keyId: principal.keyId,
      model: plan.request.model,
      cap: plan.request.maxOutputTokens,
      overrun: completion.overrun,
    },
    "the model provider went past the output cap: the answer was cut at it",
  );
}

/** Gives up the id of what was never kept (best effort). */
function disown(deps: ModelCallDeps, plan: CallPlan<unknown, StreamedCall>): Promise<void> {
  return plan.owned && deps.authorization
    ? releaseOwnership(deps.authorization, plan.caller.principal, plan.owned)
    : Promise.resolve();
}

/**
 * Records one model call's tokens for the principal: its organization, key
 * and end user; `model` as the provider named the model that answered;
 * priced as the deployment that served it (`servedBy`; not known: at
 * `price`, what the call was reserved at), cached input at its own price;
 * marked as paid with the organization's own key when that deployment used
 * it (`servedBy.byok`). An answer from the response cache (`cacheHit`) is
 * a request without provider tokens or cost, counted as cached.
 */
export function recordUsage(
  store: UsageStore,
  principal: Principal,
  model: string,
  usage: Usage,
  pricing: UsagePricing = {},
): Promise<void> {
  return store.record(usageEventOf(principal, model, usage, pricing));
}

/**
 * `recordUsage` for a call whose answer is about to be written: sent now,
 * not waited for (`UsageStore.recordSoon`), so the answer does not wait on
 * Redis's reply.
 */
export function recordUsageSoon(
  store: UsageStore,
  principal: Principal,
  model: string,
  usage: Usage,
  pricing: UsagePricing = {},
): void {
  store.recordSoon(usageEventOf(principal, model, usage, pricing));
}

interface UsagePricing {
  cachedTokens?: number;
  servedBy?: ServedBy | undefined;
  price?: ModelPrice | undefined;
  cacheHit?: boolean | undefined;
}

/** The `provider` of the usage rows of calls the response cache answered. */
export const CACHE_SERVED = "cache";

function usageEventOf(principal: Principal, model: string, usage: Usage, pricing: UsagePricing): UsageEvent {
  const { servedBy } = pricing;
  const who = { org: principal.org, keyId: principal.keyId, user: principal.user, model };
  // A hit was served by the response cache, not a deployment: `deployments` rows (and `pnpm keys usage`'s
  // `served`) show it as the provider `cache`, so they add up to the model's row.
  if (pricing.cacheHit)
    return { ...who, usage: NO_TOKENS, cachedResponse: true, deployment: { provider: CACHE_SERVED, model } };
  return {
    ...who,
    usage,
    cachedTokens: pricing.cachedTokens ?? 0,
    price: servedBy ? servedBy.price : pricing.price,
    deployment: servedBy ? { provider: servedBy.provider, model: servedBy.upstreamModel } : undefined,
    ...(servedBy?.byok ? { ownKey: true } : {}),
  };
}

const NO_TOKENS: Usage = { input_tokens: 0, output_tokens: 0, total_tokens: 0 };

/** What a completion used, as budgets settle it: nothing for an answer from the response cache. */
export const usedBy = (completion: Completion) =>
  completion.cacheHit
    ? { ...NO_TOKENS, cached_tokens: 0 }
    : { ...completion.usage, cached_tokens: completion.usageDetails.cachedTokens };

/**
 * A call the provider had but never reported on (the caller went away, the
 * stream broke): the budgets are charged, and usage records, the prompt as
 * counted for admission (an upper bound of what the provider read) plus the
 * tokens of what the model produced (`produced`, as counted the same way),
 * at the price of the deployment it came from (`servedBy`; not known: the
 * price it was reserved at, the highest it could have reached).
 */
export async function chargeUnreported(
  store: UsageStore,
  admitted: AdmittedCall,
  plan: { caller: Caller; request: ChatRequest },
  produced: string,
  servedBy?: ServedBy,
): Promise<Usage> {
  const [input, output] = await Promise.all([
    admitted.promptTokens(),
    countTokens(plan.request.model, produced),
  ]);
  const usage = { input_tokens: input, output_tokens: output, total_tokens: input + output };
  await Promise.all([
    admitted.settle(usage, servedBy),
    recordUsage(store, plan.caller.principal, plan.request.model, usage, {
      servedBy,
      price: admitted.reservedPrice,
    }),
  ]);
  return usage;
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
