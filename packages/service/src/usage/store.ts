import type { RedisClient } from "@gw/core";
import type { Usage } from "../llm/provider.ts";

export const USAGE_DIMENSIONS = ["model", "user", "key"] as const;
export type UsageDimension = (typeof USAGE_DIMENSIONS)[number];
const METRICS = ["requests", "input_tokens", "output_tokens", "total_tokens"] as const;

export type Totals = Record<(typeof METRICS)[number], number>;

export interface UsageEvent {
  org: string;
  keyId: string;
  user: string;
  model: string;
  usage: Usage;
  at?: Date;
}

/** `YYYY-MM-DD` in UTC. */
export const utcDay = (at: Date) => at.toISOString().slice(0, 10);
const dayKey = (org: string, day: string) => `gw:usage:{${org}}:${day}`;
const field = (dimension: UsageDimension | "total", value: string, metric: string) =>
  `${dimension}|${encodeURIComponent(value)}|${metric}`;
const zero = (): Totals => ({ requests: 0, input_tokens: 0, output_tokens: 0, total_tokens: 0 });

/**
 * Requests and tokens per organization and UTC day, broken down by model,
 * end user and API key: one Redis hash a day, incremented atomically, kept
 * for 400 days.
 */
export class UsageStore {
  private readonly redis: RedisClient;

  constructor(redis: RedisClient) {
    this.redis = redis;
  }

  async record(event: UsageEvent): Promise<void> {
    const key = dayKey(event.org, utcDay(event.at ?? new Date()));
    const amounts: Totals = { requests: 1, ...event.usage };
    const tx = this.redis.multi();
    for (const [dimension, value] of [
      ["total", ""],
      ["model", event.model],
      ["user", event.user],
      ["key", event.keyId],
    ] as const) {
      for (const metric of METRICS) tx.hincrby(key, field(dimension, value, metric), amounts[metric]);
    }
    tx.expire(key, 400 * 86_400);
    await tx.exec();
  }

  /** Totals over the days `start`..`end` (inclusive), and per value of `groupBy` when given. */
  async query(org: string, start: string, end: string, groupBy?: UsageDimension) {
    const days: string[] = [];
    for (let d = new Date(`${start}T00:00:00Z`); utcDay(d) <= end; d = new Date(d.getTime() + 86_400_000)) {
      days.push(utcDay(d));
    }
    const pipeline = this.redis.pipeline();
    for (const day of days) pipeline.hgetall(dayKey(org, day));
    const hashes = ((await pipeline.exec()) ?? []).map(([, h]) => (h ?? {}) as Record<string, string>);
    const totals = zero();
    const groups = new Map<string, Totals>();
    for (const hash of hashes) {
      for (const [name, amount] of Object.entries(hash)) {
        const [dimension, encoded, metric] = name.split("|") as [string, string, keyof Totals];
        if (dimension === "total") totals[metric] += Number(amount);
        else if (dimension === groupBy) {
          const value = decodeURIComponent(encoded);
          const group = groups.get(value) ?? zero();
          group[metric] += Number(amount);
          groups.set(value, group);
        }
      }
    }
    const data = [...groups]
      .map(([value, t]) => ({ [groupBy === "key" ? "key_id" : (groupBy as string)]: value, ...t }))
      .sort((a, b) => b.total_tokens - a.total_tokens || b.requests - a.requests);
    return { totals, data };
  }
}
