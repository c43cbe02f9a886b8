/**
 * What a model call's admission costs with token and spend budgets, beside
 * one with request windows only: the same Redis, the same concurrency.
 */

import type { Limits } from "@gw/core/limits";
import type { RedisClient } from "@gw/core/redis";
import { CountingWindows } from "@gw/core/windows";
import { RequestWindows } from "../../packages/gateway/src/rate-limit/request-windows.ts";
import { countPromptTokens } from "../../packages/service/src/llm/tokens.ts";
import type { Report } from "./report.ts";

const PROMPT = [
  { role: "system" as const, content: "You are a helpful assistant. Answer briefly and cite what you use." },
  {
    role: "user" as const,
    content:
      "Summarise the trade-offs between fixed and sliding rate-limit windows for an API gateway that " +
      "fronts several model providers, with attention to bursts, fairness between tenants and cost.",
  },
];

export async function benchAdmission(
  md: Report,
  redis: RedisClient,
  measure: (op: (i: number) => Promise<unknown>) => Promise<number>,
): Promise<void> {
  const requestsOnly = { second: 1e9, minute: 1e9, hour: 1e9, day: 1e9 };
  const budgeted: Limits = {
    ...requestsOnly,
    tokens: { minute: 1e12, hour: 1e12, day: 1e12, month: 1e12 },
    spend: { day: 1e6, month: 1e6 },
    endUser: { tokens: { day: 1e12 } },
  };
  const windows = requestWindows(redis, "bench:adm-requests");
  const budgets = new CountingWindows(redis, { prefix: "bench:adm-budgets" });
  const reserve = (i: number) => {
    const key = `k${i % 64}`;
    const tokens = countPromptTokens("gpt-4o-mini", PROMPT) + 256;
    return budgets.reserve(
      key,
      budgets.counters(key, `u${i % 8}`, budgeted, { requests: 1, tokens, spend: 42_000 }),
      { lease: { onExpiry: { requests: 1, tokens: tokens - 256, spend: 20_000 } } },
    );
  };
  md.rates("Admission of a model call, 16 concurrent callers, Redis on loopback", [
    [
      "request windows only (4 windows, the gateway's script)",
      await measure((i) => windows.decide(`k${i % 64}`, requestsOnly)),
    ],
    [
      "requests, tokens, spend and an end user's tokens (11 windows, one script)",
      await measure((i) => {
        const key = `k${i % 64}`;
        return budgets.reserve(
          key,
          budgets.counters(key, `u${i % 8}`, budgeted, { requests: 1, tokens: 300, spend: 42_000 }),
        );
      }),
    ],
    [
      "the same as a lease (indexed, then reserved), with the prompt counted by the tokenizer (o200k_base)",
      await measure(reserve),
    ],
    [
      "the same, then settled with the provider's usage (index, 2 scripts, unindexed)",
      await measure(async (i) => {
        const result = await reserve(i);
        if (result.admitted)
          await budgets.settle(result.reservation, { requests: 1, tokens: 120, spend: 9_000 });
      }),
    ],
  ]);
}

/** The gateway's request windows deciding every request in Redis (no leases): one script per decision. */
export function requestWindows(redis: RedisClient, prefix: string): RequestWindows {
  return new RequestWindows(new CountingWindows(redis, { prefix }), {
    leases: { share: 0, maxPoints: 0, maxMs: 0 },
  });
}
