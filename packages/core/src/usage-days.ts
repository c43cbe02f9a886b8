/**
 * How usage is kept in Redis, for the service that records it and the
 * `pnpm keys usage` command that reads a key's part of it: one hash per
 * organization and UTC day (`gw:usage:{org}:YYYY-MM-DD`) whose fields are
 * `dimension|value|metric`, the value URI-encoded and, for a breakdown, its
 * parts joined by U+0000 (never in any).
 *
 * A call writes the few breakdowns the rest add up from (`CALL_BREAKDOWNS`); a
 * day is read whole, and `readUsageDays` gives it with every breakdown a report
 * reads (`withEveryBreakdown`), the ones written before this layout included.
 */
import type { RedisClient } from "./redis.ts";
import { NANO_USD_PER_USD } from "./windows.ts";

export const USAGE_METRICS = [
  "requests",
  "input_tokens",
  "output_tokens",
  "total_tokens",
  "cost_nusd",
  "cached_requests",
] as const;
export type UsageSums = Record<(typeof USAGE_METRICS)[number], number>;
/** What a report shows per row and in total: spend as `cost_usd`, in US dollars. */
export type UsageTotals = Omit<UsageSums, "cost_nusd"> & { cost_usd: number };

/** `YYYY-MM-DD` in UTC. */
export const utcDay = (at: Date) => at.toISOString().slice(0, 10);

const DAY_MS = 86_400_000;
/** The UTC day `utcDayAt` last gave, and the milliseconds it spans (`[start, end)`). */
let lastDay = { start: 0, end: 0, day: "" };

/**
 * `utcDay` of a time in milliseconds since the epoch, the day remembered while the time stays in it: a
 * model call's usage asks it on every call, and a `Date` and its ISO string cost more than the rest of
 * the usage's arguments. (A UTC day is always 86,400,000 ms in ECMAScript time.)
 */
export function utcDayAt(ms: number): string {
  if (ms < lastDay.start || ms >= lastDay.end) {
    const start = ms - (((ms % DAY_MS) + DAY_MS) % DAY_MS);
    lastDay = { start, end: start + DAY_MS, day: utcDay(new Date(start)) };
  }
  return lastDay.day;
}
export const usageDayKey = (org: string, day: string) => `gw:usage:{${org}}:${day}`;
export const usageField = (dimension: string, value: string, metric: string) =>
  `${dimension}|${encodeURIComponent(value)}|${metric}`;
/** The value of a breakdown field from its parts. */
export const usagePair = (...parts: string[]) => parts.join("\u0000");
export const zeroUsage = (): UsageSums => ({
  requests: 0,
  input_tokens: 0,
  output_tokens: 0,
  total_tokens: 0,
  cost_nusd: 0,
  cached_requests: 0,
});
export const usageTotals = ({ cost_nusd, ...sums }: UsageSums): UsageTotals => ({
  ...sums,
  cost_usd: cost_nusd / NANO_USD_PER_USD,
});

/** The UTC days `start`..`end` (inclusive, `YYYY-MM-DD`). */
export function usageDays(start: string, end: string): string[] {
  const days: string[] = [];
  for (let d = new Date(`${start}T00:00:00Z`); utcDay(d) <= end; d = new Date(d.getTime() + 86_400_000)) {
    days.push(utcDay(d));
  }
  return days;
}

/**
 * The breakdowns a call writes: one end user's calls by key, and by model (`…_deployment` with the
 * deployment that served it: provider and upstream model), and the calls paid with the organization's own
 * key by end user. Each names what it adds up to (`withEveryBreakdown`): a call writes 3 of them (4 with its
 * organization's key) where it wrote 9 (11), a third of the script's increments, and a day keeps no total an
 * end user's fields already hold.
 */
export const CALL_BREAKDOWNS = {
  userKey: "~user_key",
  userModel: "~user_model",
  userModelDeployment: "~user_model_deployment",
  userPaidBy: "~user_paid_by",
} as const;

/** The encoded value's parts (U+0000 is `%00` encoded, and nothing else is). */
const partsOf = (encoded: string) => encoded.split("%00");
const joined = (...encoded: string[]) => encoded.join("%00");

/** What each of `CALL_BREAKDOWNS` adds up to: the fields of every breakdown a report reads, from its value's parts. */
const ADDS_UP_TO: Record<string, (value: string) => [dimension: string, encoded: string][]> = {
  [CALL_BREAKDOWNS.userKey]: (value) => {
    const [user = "", key = ""] = partsOf(value);
    return [
      ["total", ""],
      ["user", user],
      ["key", key],
      ["user_key", value],
    ];
  },
  [CALL_BREAKDOWNS.userModel]: (value) => {
    const [, model = ""] = partsOf(value);
    return [
      ["model", model],
      ["user_model", value],
    ];
  },
  [CALL_BREAKDOWNS.userModelDeployment]: (value) => {
    const [user = "", model = "", provider = "", upstream = ""] = partsOf(value);
    return [
      ["model", model],
      ["user_model", joined(user, model)],
      ["model_deployment", joined(model, provider, upstream)],
      ["user_model_deployment", value],
    ];
  },
  [CALL_BREAKDOWNS.userPaidBy]: (value) => {
    const [, payer = ""] = partsOf(value);
    return [
      ["paid_by", payer],
      ["user_paid_by", value],
    ];
  },
};

/**
 * A day's hash, its amounts as numbers, with the fields every breakdown a report reads: each of
 * `CALL_BREAKDOWNS`'s fields added to those it adds up to, beside (and to) the fields the same breakdowns
 * had before calls wrote only these.
 */
export function withEveryBreakdown(hash: Record<string, string>): Map<string, number> {
  const sums = new Map<string, number>();
  const add = (name: string, amount: number) => sums.set(name, (sums.get(name) ?? 0) + amount);
  for (const [name, amount] of Object.entries(hash)) {
    const [dimension = "", encoded = "", metric = ""] = name.split("|");
    const addsUpTo = ADDS_UP_TO[dimension];
    if (!addsUpTo) {
      add(name, Number(amount));
      continue;
    }
    for (const [to, value] of addsUpTo(encoded)) add(`${to}|${value}|${metric}`, Number(amount));
  }
  return sums;
}

/** The day hashes of `org` over `days`, in order (an absent day is empty), with every breakdown (`withEveryBreakdown`). */
export async function readUsageDays(
  redis: RedisClient,
  org: string,
  days: readonly string[],
): Promise<Map<string, number>[]> {
  const pipeline = redis.pipeline();
  for (const day of days) pipeline.hgetall(usageDayKey(org, day));
  return ((await pipeline.exec()) ?? []).map(([, h]) =>
    withEveryBreakdown((h ?? {}) as Record<string, string>),
  );
}

/** The breakdown of one API key's calls by model and the deployment that served each (`pnpm keys usage`). */
export const KEY_DEPLOYMENT = "key_model_deployment";

export interface KeyModelUsage extends UsageTotals {
  model: string;
  /** The deployments that served the model's calls for the key, busiest first. */
  deployments: ({ provider: string; model: string } & UsageTotals)[];
}

/**
 * One key's calls over `start`..`end` by model and serving deployment, busiest model
 * first: what `pnpm keys usage` shows beside the key's windows.
 */
export async function keyUsageByDeployment(
  redis: RedisClient,
  org: string,
  keyId: string,
  start: string,
  end: string,
): Promise<KeyModelUsage[]> {
  const prefix = `${KEY_DEPLOYMENT}|${encodeURIComponent(`${keyId}\u0000`)}`;
  const served = new Map<string, UsageSums>();
  for (const hash of await readUsageDays(redis, org, usageDays(start, end))) {
    for (const [name, amount] of hash) {
      if (!name.startsWith(prefix)) continue;
      const [, encoded, metric] = name.split("|") as [string, string, keyof UsageSums];
      const value = decodeURIComponent(encoded).slice(keyId.length + 1);
      const sums = served.get(value) ?? zeroUsage();
      sums[metric] += amount;
      served.set(value, sums);
    }
  }
  const models = new Map<string, { sums: UsageSums; deployments: KeyModelUsage["deployments"] }>();
  for (const [value, sums] of served) {
    const [model, provider, upstream] = value.split("\u0000") as [string, string, string];
    const row = models.get(model) ?? { sums: zeroUsage(), deployments: [] };
    for (const metric of USAGE_METRICS) row.sums[metric] += sums[metric];
    row.deployments.push({ provider, model: upstream, ...usageTotals(sums) });
    models.set(model, row);
  }
  const busiest = (a: UsageTotals, b: UsageTotals) =>
    b.total_tokens - a.total_tokens || b.requests - a.requests;
  return [...models]
    .map(([model, { sums, deployments }]) => ({
      model,
      ...usageTotals(sums),
      deployments: deployments.sort(busiest),
    }))
    .sort(busiest);
}
