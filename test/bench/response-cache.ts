/**
 * The response cache (docs/api/cache.md): what a hit adds beside the
 * provider called directly (goal: under 0.5 ms), beside the same call
 * through the gateway that the cache does not answer. One fake provider,
 * gateway and service in processes of their own (the model-calls stack),
 * and the gateway with the service in its process (`SERVICE_IN_GATEWAY`),
 * calls alternating at concurrency 1. `BENCH_CACHE_CALLS` calls per row
 * (default 300). Alone: `BENCH_ONLY=cache pnpm bench`.
 */
import { DEFAULT_PERMISSIONS } from "@gw/core/permissions";
import { createRedis } from "@gw/core/redis";
import { ApiKeyStore } from "@gw/gateway";
import { bearer, CHAT, chatBody, p50, RESPONSES, startModelStack, timedCall } from "./model-calls.ts";
import type { Report } from "./report.ts";

const CALLS = Number(process.env.BENCH_CACHE_CALLS ?? 300);
const ms = (v: number) => `${v.toFixed(2)} ms`;

export async function benchResponseCache(report: Report): Promise<void> {
  const stack = await startModelStack();
  try {
    const pair = await stack.startPair("cache");
    const one = await stack.startOneProcess("cache-one-process");
    const client = createRedis(stack.redisUrl, { connectionName: "bench-cache" });
    const store = new ApiKeyStore(client);
    const cached = (
      await store.create({
        org: "bench",
        owner: "alice",
        permissions: [...DEFAULT_PERMISSIONS],
        cache: "principal",
      })
    ).secret;
    client.disconnect();
    const json = { "content-type": "application/json" };
    const response = JSON.stringify({
      model: "echo-small",
      input: "What is the capital of France? Answer in one word.",
      store: false,
    });
    const rows: [string, string, string][] = [];
    const compare = async (name: string, path: string, body: string, direct: string, stream = false) => {
      const calls = {
        direct: () => timedCall(`${stack.providerUrl}/chat/completions`, json, direct, stream),
        hit: () => timedCall(`${pair.gateway.url}${path}`, bearer(cached), body, stream),
        hitOne: () => timedCall(`${one.gateway.url}${path}`, bearer(cached), body, stream),
        uncached: () => timedCall(`${pair.gateway.url}${path}`, bearer(stack.plainKey), body, stream),
      };
      const times: Record<keyof typeof calls, number[]> = { direct: [], hit: [], hitOne: [], uncached: [] };
      // The first call through the cached key is its miss; every later one a hit.
      for (let i = 0; i < 20 + CALLS; i++)
        for (const [which, call] of Object.entries(calls) as [keyof typeof calls, () => Promise<number>][]) {
          const t = await call();
          if (i >= 20) times[which].push(t);
        }
      const [direct0, hit, hitOne, uncached] = [
        p50(times.direct),
        p50(times.hit),
        p50(times.hitOne),
        p50(times.uncached),
      ];
      rows.push(
        [`${name}: to the provider`, ms(direct0), "–"],
        [`${name}: through the gateway, cache hit`, ms(hit), ms(hit - direct0)],
        [`${name}: cache hit, the service in the gateway's process`, ms(hitOne), ms(hitOne - direct0)],
        [
          `${name}: through the gateway, cache off (the provider answers)`,
          ms(uncached),
          ms(uncached - direct0),
        ],
      );
    };
    await compare("chat completion", CHAT, chatBody(), chatBody());
    await compare("response, `store: false`", RESPONSES, response, chatBody());
    await compare("streamed chat completion, first byte", CHAT, chatBody(true), chatBody(true), true);
    report.section(
      "Response cache: a hit beside the provider",
      `${CALLS} calls of each after 20 warm-up calls, alternating one at a time at concurrency 1: the fake provider called directly, the same request through gateway and service on a key with \`cache: "principal"\` (every call after the first a hit: the provider is not called), the same through the gateway with the service in its process (\`SERVICE_IN_GATEWAY\`; its first call is a hit too, the entry being the same), and through a key without the cache (the provider answers). "Added" is the p50 beside the provider's; a hit's goal is under 0.5 ms. The fake provider answers at once, so a hit saves here only what the provider call costs on loopback; with a real model it saves the model's whole time.`,
    );
    report.table(["call", "p50", "added beside the provider"], rows);
  } finally {
    await stack.close();
  }
}
