/** Which Redis a test gets: one server or a Redis Cluster, started per block, both run side by side. */
import type { RedisClient } from "@gw/core/redis";
import { afterAll, beforeAll, describe } from "vitest";
import { type RedisTopology, startTestRedis, type TestRedisStore, testRedisClient } from "./redis.ts";
import { startTestRedisCluster } from "./redis-cluster.ts";

/** Both topologies, for `describe.each(REDIS_TOPOLOGIES)` over a file's Redis tests. */
export const REDIS_TOPOLOGIES: readonly RedisTopology[] = ["single", "cluster"];

/**
 * `describe.each(REDIS_TOPOLOGIES)(name, body)` with the topologies' blocks at the same time: each
 * starts its own Redis (and whatever else it uses) and runs its tests one after another as any block
 * does, but one block's waits (on real time, on processes) overlap the other's. Only for blocks that
 * share nothing else while they run: no `process.env`, no spies on shared modules.
 */
export function describeEachTopology(name: string, body: (topology: RedisTopology) => void): void {
  describe.each(REDIS_TOPOLOGIES)(name, { concurrent: true }, (topology) => {
    // Tests inherit `concurrent` from their block: this one puts them back in turn.
    describe("in turn", { concurrent: false }, () => body(topology));
  });
}

/** A test Redis of the given topology. */
export function startTestRedisOf(topology: RedisTopology): Promise<TestRedisStore> {
  return topology === "cluster" ? startTestRedisCluster() : startTestRedis();
}

/**
 * A test Redis of `topology` whose start begins now, for a `beforeAll` to take
 * later (`const redis = redisStartedEarly(topology)` in a `describe` callback,
 * `await redis()` in its `beforeAll`). It matters for a Redis Cluster: its masters
 * serve nothing for their first two seconds (a delay built into Redis before a
 * master of a failed cluster takes writes), which then pass while the file's
 * earlier blocks run instead of before this block's tests. One Redis per call, however often it is taken; the taker stops
 * it. One never taken (its tests filtered out) ends with the test process, as
 * every process a test starts does.
 */
export function redisStartedEarly(topology: RedisTopology): () => Promise<TestRedisStore> {
  if (topology === "single") return startTestRedis;
  const started = startTestRedisCluster();
  started.catch(() => {}); // its error reaches whoever takes it
  return () => started;
}

/**
 * Per `describe` block (or file): a test Redis of `topology` and a client of
 * it (`createRedis`, as the processes connect), torn down afterwards; a
 * cluster's start begins as the block is collected (`redisStartedEarly`).
 */
export function useTestRedis(topology: RedisTopology = "single"): {
  server: TestRedisStore;
  redis: RedisClient;
} {
  const holder = {} as { server: TestRedisStore; redis: RedisClient };
  const server = redisStartedEarly(topology);
  beforeAll(async () => {
    holder.server = await server();
    holder.redis = testRedisClient(holder.server.url);
  });
  afterAll(async () => {
    holder.redis?.disconnect();
    await holder.server?.stop();
  });
  return holder;
}
