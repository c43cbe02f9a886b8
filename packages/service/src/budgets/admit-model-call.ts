import { AppError, forbidden, serviceUnavailable } from "@gw/core/errors";
import { openAiRateLimitHeaders, principalOf, secondsUntil } from "@gw/core/http";
import { hasBudgets, limitEntries } from "@gw/core/limits";
import type { Logger } from "@gw/core/logger";
import { type CountingWindows, type Reservation, type WindowState, WindowStoreError } from "@gw/core/windows";
import type { Response } from "express";
import { costNanoUsd, type ModelPrice } from "../llm/prices.ts";
import type { ChatMessage, FunctionTool } from "../llm/provider.ts";
import { countPromptTokens } from "../llm/tokens.ts";
import type { BudgetMetrics } from "./budget-metrics.ts";

export interface BudgetDeps {
  windows: CountingWindows;
  prices: ReadonlyMap<string, ModelPrice>;
  /** Output tokens reserved, and sent as the cap, when a budgeted call names none. */
  defaultMaxOutputTokens: number;
  metrics: BudgetMetrics;
  logger: Logger;
  /** For tests: runs after the prompt is counted, right before the reservation (to force interleavings). */
  beforeReserve?: () => Promise<void>;
}

/** A model call as it will be sent. */
export interface ModelCall {
  model: string;
  messages: ChatMessage[];
  tools?: FunctionTool[] | undefined;
  /** The caller's output cap, if any. */
  maxOutputTokens?: number | undefined;
}

/** Tokens a provider reported for a call. */
export interface UsedTokens {
  input_tokens: number;
  output_tokens: number;
  /** Input tokens served from the provider's cache (priced as cached input). */
  cached_tokens?: number;
}

/** An admitted model call: send it with `maxOutputTokens`, then settle (or release) its reservation once. */
export interface AdmittedCall {
  /** The output cap to send: the caller's, or under budgets the configured default. */
  maxOutputTokens: number | undefined;
  /** Tokens of the prompt as counted for the reservation (0 when nothing was reserved). */
  promptTokens: number;
  /** Replaces the reservation by what the provider reported. Only the first settle or release counts. */
  settle(used: UsedTokens): Promise<void>;
  /** The provider failed before any output: tokens and spend go back (the request stays counted). */
  release(): Promise<void>;
}

/** Pauses before a settlement is tried again (Redis away, or an answer lost). */
const SETTLE_RETRIES_MS = [200, 1_000, 5_000];

/**
 * Admission of a model call, before the provider is reached, for a key with
 * token or spend budgets (its own or its end users'): counts the prompt with
 * the model family's tokenizer, adds the output cap, prices both, and
 * reserves tokens and spend in every limited window of the key, and
 * requests, tokens and spend in the end user's, in one Redis script: all or
 * nothing (the gateway counted the key's request windows already). Refused:
 * 429 with `Retry-After`, counted nowhere. The reservation is a lease held
 * by this process: if it dies before settling, a sweep charges the prompt
 * (`CountingWindows.sweep`). Sets OpenAI's `x-ratelimit-*-tokens` headers of
 * the answer. A key with a spend limit cannot use a model without a price
 * (403). Keys without budgets pass untouched. Every endpoint that calls a
 * model calls this first, whatever path the gateway saw.
 */
export async function admitModelCall(
  deps: BudgetDeps,
  res: Response,
  call: ModelCall,
): Promise<AdmittedCall> {
  const admission = res.locals.admission;
  if (!admission || !hasBudgets(admission.limits)) return unbudgeted(call);
  const { limits } = admission;
  const principal = principalOf(res);
  const price = deps.prices.get(call.model);
  const spendLimited = [...limitEntries(limits), ...limitEntries(limits.endUser)].some(
    (e) => e.unit === "spend",
  );
  if (spendLimited && !price)
    throw forbidden(
      `The model '${call.model}' has no price, and this key has a spend limit: it cannot use it`,
      { param: "model" },
    );

  const maxOutputTokens = call.maxOutputTokens ?? deps.defaultMaxOutputTokens;
  const promptTokens = countPromptTokens(call.model, call.messages, call.tools);
  const promptSpend = price ? costNanoUsd(price, { input_tokens: promptTokens, output_tokens: 0 }) : 0;
  const counters = deps.windows
    .counters(principal.keyId, principal.user, limits, {
      requests: 1,
      tokens: promptTokens + maxOutputTokens,
      spend: price ? costNanoUsd(price, { input_tokens: promptTokens, output_tokens: maxOutputTokens }) : 0,
    })
    .filter((c) => c.scope === "endUser" || c.unit !== "requests");
  await deps.beforeReserve?.();
  let result: Awaited<ReturnType<CountingWindows["reserve"]>>;
  try {
    // Whoever sweeps a lease abandoned by a dead process charges the prompt: the provider may have had it.
    const onExpiry = { requests: 1, tokens: promptTokens, spend: promptSpend };
    result = await deps.windows.reserve(principal.keyId, counters, { lease: { onExpiry } });
  } catch (err) {
    if (err instanceof WindowStoreError)
      throw serviceUnavailable("Rate limiting is unavailable; try again", err);
    throw err;
  }
  setHeaders(res, result.states);
  if (!result.admitted) {
    const by = result.refusedBy;
    deps.metrics.refused(by);
    deps.logger.info(
      { requestId: res.req.id, org: principal.org, unit: by.unit, window: by.window, scope: by.scope },
      "model call refused by a budget",
    );
    throw new AppError("rate_limited", `Rate limit exceeded (${by.scope} ${by.unit} ${by.window})`, {
      headers: { "Retry-After": String(secondsUntil(by.resetMs)) },
    });
  }
  deps.metrics.reserved(counters);
  const reservation = result.reservation;
  let settled = false;
  const settle = async (tokens: number, spend: number) => {
    if (settled) return;
    settled = true;
    await settleWithRetries(deps, reservation, { requests: 1, tokens, spend });
  };
  return {
    maxOutputTokens,
    promptTokens,
    settle: (used) => settle(used.input_tokens + used.output_tokens, price ? costNanoUsd(price, used) : 0),
    release: () => settle(0, 0),
  };
}

/** Settles, retrying when Redis fails (the reservation settles once); if it stays away, a sweep settles the lease once it expires. */
async function settleWithRetries(
  deps: BudgetDeps,
  reservation: Reservation,
  used: { requests: number; tokens: number; spend: number },
): Promise<void> {
  for (let attempt = 0; ; attempt++) {
    try {
      if (await deps.windows.settle(reservation, used)) {
        for (const c of reservation.counters) deps.metrics.reconciled(c, used[c.unit] - c.amount);
      }
      return;
    } catch (err) {
      if (attempt === SETTLE_RETRIES_MS.length) {
        deps.logger.warn({ err: (err as Error).message }, "a budget reservation could not be settled");
        return;
      }
      await new Promise((r) => setTimeout(r, SETTLE_RETRIES_MS[attempt]).unref());
    }
  }
}

function unbudgeted(call: ModelCall): AdmittedCall {
  const nothing = async () => undefined;
  return { maxOutputTokens: call.maxOutputTokens, promptTokens: 0, settle: nothing, release: nothing };
}

/** The answer's token headers (OpenAI's); the gateway sets the request windows' headers. */
function setHeaders(res: Response, states: WindowState[]): void {
  const tokens = states.filter((s) => s.unit === "tokens");
  for (const [name, value] of Object.entries(openAiRateLimitHeaders("tokens", tokens)))
    res.setHeader(name, value);
}
