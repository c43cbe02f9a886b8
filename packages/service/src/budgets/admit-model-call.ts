import { AppError, forbidden, serviceUnavailable } from "@gw/core/errors";
import type { Admission } from "@gw/core/internal-assertion";
import { hasBudgets, limitEntries } from "@gw/core/limits";
import type { Logger } from "@gw/core/logger";
import type { Principal } from "@gw/core/principal";
import { type CountingWindows, type Reservation, type WindowState, WindowStoreError } from "@gw/core/windows";
import type { CacheDirective } from "../calls/response-cache.ts";
import type { Catalogue } from "../llm/catalogue.ts";
import { costNanoUsd, type ModelPrice } from "../llm/prices.ts";
import type { CallRoute, ChatRequest, ServedBy } from "../llm/provider.ts";
import { countPromptTokens } from "../llm/tokens.ts";
import type { BudgetMetrics } from "./budget-metrics.ts";
import { budgetHeaders, retryAfter } from "./headers.ts";

export interface BudgetDeps {
  windows: CountingWindows;
  /** The price a call is reserved at: the highest among the deployments it may reach (the catalogue). */
  prices: Pick<Catalogue, "reservePrice">;
  /** Output tokens reserved, and sent as the cap, when a budgeted call names none. */
  defaultMaxOutputTokens: number;
  metrics: BudgetMetrics;
  logger: Logger;
  /** For tests: runs after the prompt is counted, right before the reservation (to force interleavings). */
  beforeReserve?: () => Promise<void>;
}

/**
 * Who makes a model call, in plain values: the principal, and the limits of
 * its key as resolved for this call (the gateway's signed assertion for a
 * request; the key store for an eval run). No admission: nothing limits it.
 */
export interface Caller {
  principal: Principal;
  admission: Admission | undefined;
  /**
   * Whether the key's request windows already counted this call: true for a
   * request the gateway forwarded (it counts every request before any work),
   * false for a call no gateway saw (an eval run's), which counts here.
   */
  requestsCounted: boolean;
  /** The request the call serves (an eval run: the run's id), for the log line of a refusal and the audit record of an organization's provider key's first use. */
  requestId?: string | undefined;
  /** What the request's `X-Gateway-Cache` asks of the response cache; unset: `default`. */
  cache?: CacheDirective | undefined;
  /**
   * The organization's guardrail version, read as the request came in
   * (beside its replay guard: one round trip for both); unset: the call's
   * guardrails read it when they resolve.
   */
  guardrailVersion?: Promise<string | undefined> | undefined;
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
  /** The windows after the reservation, for the answer's rate-limit headers (none when nothing was reserved). */
  windows: WindowState[];
  /** Tokens of the prompt as counted (an upper bound: see `llm/tokens.ts`); counted once, when first asked. */
  promptTokens(): Promise<number>;
  /**
   * The price the call was reserved at: the highest among the deployments it
   * may reach; undefined when one of them is unpriced. What is charged when
   * the deployment that served it is not known.
   */
  reservedPrice: ModelPrice | undefined;
  /**
   * Replaces the reservation by what the provider reported, priced as the
   * deployment that served it (`servedBy`; not known: the reserved price).
   * Only the first settle or release counts.
   */
  settle(used: UsedTokens, servedBy?: Pick<ServedBy, "price">): Promise<void>;
  /** The provider failed before it had the request: tokens and spend go back (the request stays counted). */
  release(): Promise<void>;
  /**
   * The prompt grew after admission (a hosted tool's results, which exist only once the tool ran, and
   * the tool runs only once its round is admitted): it is counted again, and the settlement charges up
   * to the new count rather than the reservation's. Not admitted: the budget may end past its limit by
   * what the prompt grew, and the next call is refused.
   */
  promptGrew(): Promise<void>;
}

/**
 * A call refused by a budget window: 429 with the windows' headers, and `Retry-After` unless the call
 * asks more than the whole window holds (`never`: waiting would not help, so no time is promised).
 */
export class BudgetRefused extends AppError {
  readonly refusedBy: WindowState;
  readonly windows: WindowState[];
  constructor(refusedBy: WindowState, windows: WindowState[], never = false) {
    super("rate_limited", `Rate limit exceeded (${refusedBy.scope} ${refusedBy.unit} ${refusedBy.window})`, {
      headers: { ...budgetHeaders(windows), ...(never ? {} : retryAfter(refusedBy)) },
    });
    this.name = "BudgetRefused";
    this.refusedBy = refusedBy;
    this.windows = windows;
  }
}

/**
 * What admission reads of a call that is not a chat (an embeddings call):
 * its catalogue name and route, and its output cap (0: it produces no tokens).
 */
export interface CallToAdmit {
  model: string;
  route?: CallRoute | undefined;
  maxOutputTokens?: number | undefined;
  /** Answers asked for (chat-completions `n`): each may be `maxOutputTokens` long. Unset: one. */
  n?: number | undefined;
}

/** Counts a call's prompt (its input), for the organization `tenant` when given (llm/tokens.ts). */
export type PromptCounter = (tenant?: string) => Promise<number>;

/** Pauses before a settlement is tried again (Redis away, or an answer lost). */
const SETTLE_RETRIES_MS = [200, 1_000, 5_000];

/**
 * Admission of a model call, before the provider is reached, for a key with
 * token or spend budgets (its own or its end users'): counts the prompt
 * (`countPromptTokens`: every part of it, an upper bound), adds the output
 * cap, prices both, and reserves tokens and spend in every limited window of
 * the key, and requests, tokens and spend in the end user's, in one Redis
 * script: all or nothing (the gateway counted the key's request windows
 * already; a call nobody counted yet, an eval run's, counts in them here,
 * budgets or not). Refused: `BudgetRefused` (429), counted nowhere. The
 * reservation is a lease held by this process: if it dies before settling, a
 * sweep charges the prompt (`CountingWindows.sweep`). A key with a spend
 * limit cannot use a model without a price (403). Every endpoint that calls a
 * model calls this first, whatever path the gateway saw. Knows nothing of
 * HTTP: the caller sets the answer's headers from `windows`.
 */
export function admitModelCall(deps: BudgetDeps, caller: Caller, call: ChatRequest): Promise<AdmittedCall>;
/** The same for a call that is not a chat, whose prompt `countPrompt` counts (an embeddings call's inputs). */
export function admitModelCall(
  deps: BudgetDeps,
  caller: Caller,
  call: CallToAdmit,
  countPrompt: PromptCounter,
): Promise<AdmittedCall>;
export async function admitModelCall(
  deps: BudgetDeps,
  caller: Caller,
  call: CallToAdmit,
  countPrompt: PromptCounter = (tenant) => countPromptTokens(call as ChatRequest, tenant),
): Promise<AdmittedCall> {
  const { principal, admission } = caller;
  let counted: Promise<number> | undefined;
  const promptTokens = () => {
    counted ??= countPrompt(principal.org);
    return counted;
  };
  const recount = () => {
    counted = countPrompt();
    return counted;
  };
  // Reserved at the highest price among the deployments the call may reach, its fallbacks' included.
  const price = deps.prices.reservePrice([call.model, ...(call.route?.fallbacks ?? [])]);
  if (!admission) return unbudgeted(call, price, promptTokens, recount);
  const { limits } = admission;
  const { requestsCounted } = caller;
  // A call no gateway counted (an eval run's) counts in the key's request windows here, budgets or not.
  const uncounted = !requestsCounted && limitEntries(limits).some((e) => e.unit === "requests");
  if (!hasBudgets(limits) && !uncounted) return unbudgeted(call, price, promptTokens, recount);
  const spendLimited = [...limitEntries(limits), ...limitEntries(limits.endUser)].some(
    (e) => e.unit === "spend",
  );
  if (spendLimited && !price)
    throw forbidden(
      `The model '${call.model}' has no price (or a deployment it may reach has none), and this key has a spend limit: it cannot use it`,
      { param: "model" },
    );

  const maxOutputTokens = call.maxOutputTokens ?? deps.defaultMaxOutputTokens;
  // The cap is each answer's: a call for n answers reserves the output of all of them.
  const output = maxOutputTokens * Math.max(1, call.n ?? 1);
  const prompt = await promptTokens();
  const promptSpend = price ? costNanoUsd(price, { input_tokens: prompt, output_tokens: 0 }) : 0;
  const counters = deps.windows
    .counters(principal.keyId, principal.user, limits, {
      requests: 1,
      tokens: prompt + output,
      spend: price ? costNanoUsd(price, { input_tokens: prompt, output_tokens: output }) : 0,
    })
    .filter((c) => c.scope === "endUser" || c.unit !== "requests" || !requestsCounted);
  await deps.beforeReserve?.();
  let result: Awaited<ReturnType<CountingWindows["reserve"]>>;
  try {
    // Whoever sweeps a lease abandoned by a dead process charges the prompt: the provider may have had it.
    const onExpiry = { requests: 1, tokens: prompt, spend: promptSpend };
    result = await deps.windows.reserve(principal.keyId, counters, { lease: { onExpiry } });
  } catch (err) {
    if (err instanceof WindowStoreError)
      throw serviceUnavailable("Rate limiting is unavailable; try again", err);
    throw err;
  }
  if (!result.admitted) {
    const by = result.refusedBy;
    deps.metrics.refused(by);
    deps.logger.info(
      { requestId: caller.requestId, org: principal.org, unit: by.unit, window: by.window, scope: by.scope },
      "model call refused by a budget",
    );
    const asked = counters.find((c) => c.scope === by.scope && c.unit === by.unit && c.window === by.window);
    throw new BudgetRefused(by, result.states, asked !== undefined && asked.amount > asked.quota);
  }
  deps.metrics.reserved(counters);
  const reservation = result.reservation;
  const reserved = {
    tokens: prompt + output,
    spend: price ? costNanoUsd(price, { input_tokens: prompt, output_tokens: output }) : 0,
  };
  let settled = false;
  const settle = async (tokens: number, spend: number) => {
    if (settled) return;
    settled = true;
    // Never more than was reserved: what a provider reports beyond it (it ignored the output cap, or
    // counts the prompt above the bound) is recorded as an overrun, not charged.
    const charged = {
      requests: 1,
      tokens: Math.min(tokens, reserved.tokens),
      spend: Math.min(spend, reserved.spend),
    };
    const overrun = { tokens: tokens - charged.tokens, spend: spend - charged.spend };
    if (overrun.tokens > 0 || overrun.spend > 0)
      deps.logger.warn(
        {
          requestId: caller.requestId,
          org: principal.org,
          keyId: principal.keyId,
          reserved,
          used: { tokens, spend },
        },
        "a model call used more than its reservation: charged the reservation",
      );
    await settleWithRetries(deps, reservation, charged, overrun);
  };
  return {
    maxOutputTokens,
    windows: result.states,
    reservedPrice: price,
    promptTokens,
    settle: (used, servedBy) => {
      const charged = servedBy ? servedBy.price : price;
      return settle(used.input_tokens + used.output_tokens, charged ? costNanoUsd(charged, used) : 0);
    },
    release: () => settle(0, 0),
    promptGrew: async () => {
      const grown = (await recount()) - prompt;
      if (grown <= 0) return;
      reserved.tokens += grown;
      if (price) reserved.spend += costNanoUsd(price, { input_tokens: grown, output_tokens: 0 });
    },
  };
}

/**
 * Settles, retrying when Redis fails (the reservation settles once); if it
 * stays away, a sweep settles the lease once it expires. `overrun`: what the
 * provider reported beyond the reservation, counted in the metrics only.
 */
async function settleWithRetries(
  deps: BudgetDeps,
  reservation: Reservation,
  used: { requests: number; tokens: number; spend: number },
  overrun: { tokens: number; spend: number },
): Promise<void> {
  for (let attempt = 0; ; attempt++) {
    try {
      if (await deps.windows.settle(reservation, used)) {
        for (const c of reservation.counters) {
          deps.metrics.reconciled(c, used[c.unit] - c.amount);
          if (c.unit !== "requests") deps.metrics.overrun(c, overrun[c.unit]);
        }
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

function unbudgeted(
  call: CallToAdmit,
  price: ModelPrice | undefined,
  promptTokens: () => Promise<number>,
  recount: () => Promise<number>,
): AdmittedCall {
  const nothing = async () => undefined;
  return {
    maxOutputTokens: call.maxOutputTokens,
    windows: [],
    reservedPrice: price,
    promptTokens,
    settle: nothing,
    release: nothing,
    promptGrew: async () => {
      await recount();
    },
  };
}
