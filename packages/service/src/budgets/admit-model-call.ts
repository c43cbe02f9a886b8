import { randomUUID } from "node:crypto";
import {
  type BudgetState,
  BudgetStoreError,
  type BudgetWindows,
  type Reservation,
} from "@gw/core/budget-windows";
import { AppError, forbidden, serviceUnavailable } from "@gw/core/errors";
import {
  openAiRateLimitHeaders,
  policyHeader,
  principalOf,
  rateLimitHeader,
  secondsUntil,
} from "@gw/core/http";
import { hasBudgets, limitEntries } from "@gw/core/limits";
import type { Logger } from "@gw/core/logger";
import type { Response } from "express";
import { costNanoUsd, type ModelPrice } from "../llm/prices.ts";
import type { ChatMessage, FunctionTool } from "../llm/provider.ts";
import { countPromptTokens } from "../llm/tokens.ts";
import type { BudgetMetrics } from "./budget-metrics.ts";

export interface BudgetDeps {
  windows: BudgetWindows;
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
 * reserves requests, tokens and spend in every limited window of the key and
 * of the end user in one Redis script: all or nothing. Refused: 429 with
 * `Retry-After`, counted nowhere. Sets the rate-limit headers of the answer
 * (IETF `RateLimit`/`RateLimit-Policy` for requests, OpenAI's
 * `x-ratelimit-*-requests` and `-tokens`). A key with a spend limit cannot
 * use a model without a price (403). Keys without budgets pass untouched:
 * the gateway counted their requests. Every endpoint that calls a model
 * calls this first.
 */
export async function admitModelCall(
  deps: BudgetDeps,
  res: Response,
  call: ModelCall,
): Promise<AdmittedCall> {
  const admission = res.locals.admission;
  if (!admission || !hasBudgets(admission.limits)) return unbudgeted(call);
  const { limits, requestsCounted } = admission;
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
  const counters = deps.windows.counters(principal.keyId, principal.user, limits, {
    requests: requestsCounted ? 0 : 1,
    tokens: promptTokens + maxOutputTokens,
    spend: price ? costNanoUsd(price, { input_tokens: promptTokens, output_tokens: maxOutputTokens }) : 0,
  });
  await deps.beforeReserve?.();
  let result: Awaited<ReturnType<BudgetWindows["reserve"]>>;
  try {
    result = await deps.windows.reserve(principal.keyId, counters);
  } catch (err) {
    if (err instanceof BudgetStoreError)
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
  const id = randomUUID();
  let settled = false;
  const settle = async (tokens: number, spend: number) => {
    if (settled) return;
    settled = true;
    await settleWithRetries(deps, reservation, { requests: requestsCounted ? 0 : 1, tokens, spend }, id);
  };
  return {
    maxOutputTokens,
    promptTokens,
    settle: (used) => settle(used.input_tokens + used.output_tokens, price ? costNanoUsd(price, used) : 0),
    release: () => settle(0, 0),
  };
}

/** Settles, retrying when Redis fails (the id makes a repeat a no-op); if it stays away, the reservation stands until its windows end. */
async function settleWithRetries(
  deps: BudgetDeps,
  reservation: Reservation,
  used: { requests: number; tokens: number; spend: number },
  id: string,
): Promise<void> {
  for (let attempt = 0; ; attempt++) {
    try {
      if (await deps.windows.settle(reservation, used, id)) {
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

/** The answer's rate-limit headers: IETF fields for the request windows, OpenAI's for requests and tokens. */
function setHeaders(res: Response, states: BudgetState[]): void {
  const standing = (unit: "requests" | "tokens") =>
    states
      .filter((s) => s.unit === unit)
      .map((s) => ({ ...s, window: s.scope === "key" ? s.window : `end-user-${s.window}` }));
  const requests = standing("requests");
  if (requests.length > 0) {
    res.setHeader("RateLimit-Policy", policyHeader(requests));
    res.setHeader("RateLimit", rateLimitHeader(requests));
  }
  for (const [name, value] of Object.entries({
    ...openAiRateLimitHeaders("requests", requests),
    ...openAiRateLimitHeaders("tokens", standing("tokens")),
  }))
    res.setHeader(name, value);
}
