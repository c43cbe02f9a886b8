import { type Clock, systemClock } from "@gw/core/clock";
import type { Logger } from "@gw/core/logger";
import type { Metrics } from "@gw/core/metrics";
import type { RedisClient } from "@gw/core/redis";
import {
  CALL_BREAKDOWNS,
  usageDayKey as dayKey,
  KEY_DEPLOYMENT,
  USAGE_METRICS as METRICS,
  usagePair as pair,
  readUsageDays,
  type UsageSums as Sums,
  usageTotals as totalsOf,
  type UsageTotals,
  usageDays,
  usageField,
  utcDay,
  utcDayAt,
  zeroUsage as zero,
} from "@gw/core/usage-days";
import { Counter } from "prom-client";
import { costNanoUsd, type ModelPrice } from "../llm/prices.ts";
import type { Usage } from "../llm/provider.ts";

export { utcDay };
export const USAGE_DIMENSIONS = ["model", "user", "key"] as const;
export type UsageDimension = (typeof USAGE_DIMENSIONS)[number];
/**
 * What `group_by` accepts: a dimension, `end_user` (the same as `user`: the end user a request acted for),
 * `day` (one row per UTC day of the range, oldest first), or `paid_by` (`platform`, then `organization`:
 * the calls paid with the organization's own provider key).
 */
export const USAGE_GROUPS = [...USAGE_DIMENSIONS, "end_user", "day", "paid_by"] as const;
export type UsageGroup = (typeof USAGE_GROUPS)[number];
/** What a query answers per row and in total: spend as `cost_usd`, in US dollars. */
export type Totals = UsageTotals;

export interface UsageEvent {
  org: string;
  keyId: string;
  user: string;
  model: string;
  usage: Usage;
  /** Input tokens the provider served from its cache (priced as cached input). */
  cachedTokens?: number;
  /** The price of the deployment that served it (USD per million tokens); none: it costs 0. */
  price?: ModelPrice | undefined;
  /** The deployment that served it: its provider kind and the upstream's own model id. */
  deployment?: ServingDeployment | undefined;
  /** When it happened; by default now, on the store's clock. */
  at?: Date;
  /** Paid with the organization's own provider key (a `byok` deployment), not the platform's. */
  ownKey?: boolean;
  /** Answered from the response cache: counted in `cached_requests` (its tokens are none). */
  cachedResponse?: boolean;
}

/** Where a call was served: as `group_by=model` rows list it under `deployments`. */
export interface ServingDeployment {
  provider: string;
  model: string;
}

/** How long a day's usage is kept. */
const USAGE_KEPT_SECONDS = 400 * 86_400;
/**
 * KEYS: the day's hash; ARGV: the seconds to keep it, the amount of each of
 * `METRICS` (in order), then the fields' prefixes (`dimension|value|`, one
 * per breakdown): each prefix gets every metric not zero. Fields are spelled in
 * the script, so the command carries 2 to 4 prefixes (`CALL_BREAKDOWNS`, and the
 * key's by deployment) and 6 amounts, not up to 24 fields.
 */
const RECORD_USAGE = `
local metrics = {${METRICS.map((m) => `'${m}'`).join(", ")}}
for p = ${METRICS.length + 2}, #ARGV do
  for m = 1, ${METRICS.length} do
    if ARGV[m + 1] ~= '0' then redis.call('HINCRBY', KEYS[1], ARGV[p] .. metrics[m], ARGV[m + 1]) end
  end
end
redis.call('EXPIRE', KEYS[1], ARGV[1])
`;
type Scripted = RedisClient & { recordUsage(key: string, ...args: (string | number)[]): Promise<unknown> };

/**
 * One end user's usage broken down by model or key (what that end user
 * alone may be shown), and a model's by the deployment that served it
 * (`model_deployment`, and one end user's: `user_model_deployment`).
 */
type Breakdown = "user_model" | "user_key" | "model_deployment" | "user_model_deployment";
const field = (
  dimension:
    | UsageDimension
    | Breakdown
    | typeof KEY_DEPLOYMENT
    | (typeof CALL_BREAKDOWNS)[keyof typeof CALL_BREAKDOWNS]
    | "total"
    | "paid_by"
    | "user_paid_by",
  value: string,
  metric: string,
) => usageField(dimension, value, metric);
/** The `paid_by` value of calls made with the organization's own provider key; the rest are the platform's. */
const OWN_KEY = "organization";

/**
 * Requests, tokens and cost per organization and UTC day, broken down by
 * model (and within it by the deployment that served it), end user and API
 * key: one Redis hash a day, incremented atomically, kept for 400 days.
 * Cost is counted in billionths of a dollar at the serving deployment's
 * price when it is recorded (an unpriced deployment costs 0).
 */
export class UsageStore {
  private readonly redis: RedisClient;
  private readonly clock: Clock;
  private readonly lost: (event: UsageEvent, err: unknown) => void;
  /** `recordSoon`'s records Redis has not answered yet. */
  private readonly sent = new Set<Promise<void>>();

  /**
   * `clock`: its wall time says which UTC day a call counts in. `lost`: told
   * of every event `recordSoon` could not confirm (the process logs it whole
   * and counts it).
   */
  constructor(
    redis: RedisClient,
    clock: Clock = systemClock,
    lost: (event: UsageEvent, err: unknown) => void = () => undefined,
  ) {
    if (!("recordUsage" in redis)) redis.defineCommand("recordUsage", { numberOfKeys: 1, lua: RECORD_USAGE });
    this.redis = redis;
    this.clock = clock;
    this.lost = lost;
  }

  /**
   * `record`, without holding up the answer the usage belongs to: the
   * command is written to Redis's connection now, before the caller writes
   * its answer, so a read of usage made after the answer arrives comes after
   * it; its outcome is not waited for. An event Redis refused or did not
   * confirm in time is handed to `lost` (an answer the model gave is never
   * taken back for it).
   */
  recordSoon(event: UsageEvent): void {
    const sent: Promise<void> = this.record(event)
      .catch((err: unknown) => this.lost(event, err))
      .finally(() => this.sent.delete(sent));
    this.sent.add(sent);
  }

  /** Waits until Redis has answered every record `recordSoon` sent (a process closing, before its Redis client). */
  async drain(): Promise<void> {
    await Promise.all([...this.sent]);
  }

  /** Today's UTC day on the store's clock (`YYYY-MM-DD`). */
  today(): string {
    return utcDayAt(this.clock.wall());
  }

  /** One command (a script on the day's hash), not a transaction of 22: a model call's usage costs one round trip of one small command. */
  async record(event: UsageEvent): Promise<void> {
    const key = dayKey(event.org, event.at ? utcDay(event.at) : utcDayAt(this.clock.wall()));
    const { price, deployment } = event;
    const cost = price ? costNanoUsd(price, { ...event.usage, cached_tokens: event.cachedTokens ?? 0 }) : 0;
    const amounts: Sums = {
      requests: 1,
      ...event.usage,
      cost_nusd: cost,
      cached_requests: event.cachedResponse ? 1 : 0,
    };
    await (this.redis as Scripted).recordUsage(
      key,
      USAGE_KEPT_SECONDS,
      ...METRICS.map((metric) => amounts[metric]),
      // The breakdowns the others add up from, when read (`withEveryBreakdown`).
      field(CALL_BREAKDOWNS.userKey, pair(event.user, event.keyId), ""),
      deployment
        ? field(
            CALL_BREAKDOWNS.userModelDeployment,
            pair(event.user, event.model, deployment.provider, deployment.model),
            "",
          )
        : field(CALL_BREAKDOWNS.userModel, pair(event.user, event.model), ""),
      // Only calls paid with the organization's own key: the platform's are the totals less these.
      ...(event.ownKey ? [field(CALL_BREAKDOWNS.userPaidBy, pair(event.user, OWN_KEY), "")] : []),
      ...(deployment
        ? [field(KEY_DEPLOYMENT, pair(event.keyId, event.model, deployment.provider, deployment.model), "")]
        : []),
    );
  }

  /**
   * Totals over the days `start`..`end` (inclusive), and per value of `groupBy`
   * when given (`day`: one row per day of the range, oldest first); with
   * `user`, only that end user's usage (its totals, and its own row per model,
   * key, day or itself), for a principal that may see no more.
   */
  async query(org: string, start: string, end: string, group?: UsageGroup, user?: string) {
    const groupBy: UsageDimension | undefined =
      group === "end_user" ? "user" : group === "day" || group === "paid_by" ? undefined : group;
    // `paid_by`: the calls paid with the organization's own key (the end user's own, for its view).
    const ownKey = group === "paid_by" ? zero() : undefined;
    const ownKeyField =
      user === undefined ? field("paid_by", OWN_KEY, "") : field("user_paid_by", pair(user, OWN_KEY), "");
    // One end user's view: totals from its own `user` fields, rows from its breakdown (or itself).
    const own = user === undefined ? undefined : encodeURIComponent(user);
    const ownBreakdown = groupBy === "model" ? "user_model" : groupBy === "key" ? "user_key" : "user";
    const days = usageDays(start, end);
    const hashes = await readUsageDays(this.redis, org, days);
    const totals = zero();
    const groups = new Map<string, Sums>();
    // With `group_by=model`: each model's usage by the deployment that served it (`model\0provider\0upstream`).
    const served = new Map<string, Sums>();
    const deploymentBreakdown =
      groupBy !== "model" ? undefined : own === undefined ? "model_deployment" : "user_model_deployment";
    for (const [i, hash] of hashes.entries()) {
      const daily = group === "day" ? zero() : undefined;
      if (daily) groups.set(days[i]!, daily);
      for (const [name, amount] of hash) {
        const [dimension, encoded, metric] = name.split("|") as [string, string, keyof Sums];
        if (ownKey && name.startsWith(ownKeyField)) ownKey[metric] += amount;
        if (dimension === deploymentBreakdown) {
          const value = decodeURIComponent(encoded);
          if (own === undefined) addTo(served, value, metric, amount);
          else if (value.startsWith(`${user}\u0000`))
            addTo(served, value.slice(user!.length + 1), metric, amount);
          continue;
        }
        if (own !== undefined) {
          if (dimension === "user" && encoded === own) {
            totals[metric] += amount;
            if (daily) daily[metric] += amount;
          }
          if (!groupBy || dimension !== ownBreakdown) continue;
          const value = decodeURIComponent(encoded);
          if (ownBreakdown === "user") {
            if (encoded !== own) continue;
            addTo(groups, value, metric, amount);
          } else if (value.startsWith(`${user}\u0000`)) {
            addTo(groups, value.slice(user!.length + 1), metric, amount);
          }
          continue;
        }
        if (dimension === "total") {
          totals[metric] += amount;
          if (daily) daily[metric] += amount;
        } else if (dimension === groupBy) {
          const value = decodeURIComponent(encoded);
          const group = groups.get(value) ?? zero();
          group[metric] += amount;
          groups.set(value, group);
        }
      }
    }
    if (ownKey) {
      const platform = zero();
      for (const metric of METRICS) platform[metric] = totals[metric] - ownKey[metric];
      for (const [value, sums] of [
        ["platform", platform],
        [OWN_KEY, ownKey],
      ] as const)
        if (sums.requests > 0) groups.set(value, sums);
    }
    const column = group === "key" ? "key_id" : (group as string);
    const rows = [...groups].map(([value, t]) => ({
      [column]: value,
      ...totalsOf(t),
      ...(deploymentBreakdown ? { deployments: deploymentsOf(served, value) } : {}),
    }));
    const data =
      group === "day" || group === "paid_by"
        ? rows
        : rows.sort((a, b) => b.total_tokens - a.total_tokens || b.requests - a.requests);
    return { totals: totalsOf(totals), data };
  }
}

/** The rows of `model`'s deployments, busiest first. */
function deploymentsOf(served: Map<string, Sums>, model: string) {
  const rows: ({ provider: string; model: string } & Totals)[] = [];
  for (const [value, sums] of served) {
    const [name, provider, upstream] = value.split("\u0000") as [string, string, string];
    if (name === model) rows.push({ provider, model: upstream, ...totalsOf(sums) });
  }
  return rows.sort((a, b) => b.total_tokens - a.total_tokens || b.requests - a.requests);
}

function addTo(groups: Map<string, Sums>, value: string, metric: keyof Sums, amount: number): void {
  const group = groups.get(value) ?? zero();
  group[metric] += amount;
  groups.set(value, group);
}

/**
 * Where the events `recordSoon` could not confirm go: counted
 * (`service_usage_record_failures_total`) and logged whole at `error` (its
 * organization, key, end user, model, tokens and deployment). One Redis did
 * not answer in time may still have landed: the day's totals say whether to
 * add it back.
 */
export function usageLost(metrics: Metrics, logger: Logger): (event: UsageEvent, err: unknown) => void {
  const lost = new Counter({
    name: `${metrics.prefix}_usage_record_failures_total`,
    help: "Usage records of answered model calls that Redis refused or did not confirm in time (each logged whole at error: `a model call's usage may not have been recorded`; one not confirmed may still have landed).",
    registers: [metrics.registry],
  });
  return (event, err) => {
    lost.inc();
    logger.error(
      { usageEvent: event, err: err instanceof Error ? err.message : String(err) },
      "a model call's usage may not have been recorded",
    );
  };
}
