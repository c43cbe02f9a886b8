import { ManualClock } from "@gw/core/clock";
import { createRedis } from "@gw/core/redis";
import { startTestRedis } from "@gw/test-kit";
import { describe, expect, it, vi } from "vitest";
import { OrgLimitsStore } from "./org-limits.ts";

describe("organization end-user defaults", () => {
  it("are read through a short cache, and a stale copy serves while Redis cannot be asked", async () => {
    const server = await startTestRedis();
    const redis = createRedis(server.url, {
      connectionName: "test",
      extra: { enableOfflineQueue: false, maxRetriesPerRequest: 0, retryStrategy: () => null },
    });
    redis.on("error", () => {});
    try {
      await new Promise((r) => redis.once("ready", r));
      const store = new OrgLimitsStore(redis, 0); // every read goes to Redis while it answers
      expect(await store.update("acme", { tokens: { day: 5 } })).toEqual({ tokens: { day: 5 } });
      expect(await store.cached("acme")).toEqual({ tokens: { day: 5 } });
      await store.update("acme", { tokens: { day: 7 } });
      expect(await store.cached("acme")).toEqual({ tokens: { day: 7 } });
      await server.stop();
      expect(await store.cached("acme")).toEqual({ tokens: { day: 7 } });
      await expect(store.cached("never-read")).rejects.toThrow();
    } finally {
      redis.disconnect();
      await server.stop().catch(() => undefined);
    }
  });

  it("serve the cached copy for cacheMs on the clock, then read a change made elsewhere", async () => {
    const server = await startTestRedis();
    const redis = createRedis(server.url, { connectionName: "test" });
    try {
      const clock = new ManualClock();
      const writer = new OrgLimitsStore(redis);
      const reader = new OrgLimitsStore(redis, 5_000, clock);
      await writer.update("acme", { tokens: { day: 5 } });
      expect(await reader.cached("acme")).toEqual({ tokens: { day: 5 } });
      await writer.update("acme", { tokens: { day: 7 } }); // another gateway's change
      clock.advance(4_999);
      expect(await reader.cached("acme")).toEqual({ tokens: { day: 5 } });
      clock.advance(1);
      expect(await reader.cached("acme")).toEqual({ tokens: { day: 7 } });
    } finally {
      redis.disconnect();
      await server.stop();
    }
  });

  it("after a failed read, serve the stale copy for cacheMs before asking Redis again (every request reads them)", async () => {
    const server = await startTestRedis();
    const redis = createRedis(server.url, {
      connectionName: "test",
      extra: { enableOfflineQueue: false, maxRetriesPerRequest: 0, retryStrategy: () => null },
    });
    redis.on("error", () => {});
    try {
      await new Promise((r) => redis.once("ready", r));
      const clock = new ManualClock();
      const store = new OrgLimitsStore(redis, 5_000, clock);
      await store.update("acme", { tokens: { day: 5 } });
      expect(await store.cached("acme")).toEqual({ tokens: { day: 5 } });
      await server.stop();
      const reads = vi.spyOn(store, "get");
      clock.advance(5_000);
      expect(await store.cached("acme")).toEqual({ tokens: { day: 5 } }); // Redis asked: fails
      expect(reads).toHaveBeenCalledTimes(1);
      clock.advance(4_999);
      expect(await store.cached("acme")).toEqual({ tokens: { day: 5 } }); // not asked
      expect(reads).toHaveBeenCalledTimes(1);
      clock.advance(1);
      expect(await store.cached("acme")).toEqual({ tokens: { day: 5 } });
      expect(reads).toHaveBeenCalledTimes(2);
    } finally {
      redis.disconnect();
      await server.stop().catch(() => undefined);
    }
  });
  it("a change made here while a read is in flight: the read answers what it read, not an error (every request of the organization waits on it), and the next read the change", async () => {
    const server = await startTestRedis();
    const redis = createRedis(server.url, { connectionName: "test" });
    try {
      const store = new OrgLimitsStore(redis);
      await store.update("acme", { tokens: { day: 5 } });
      const read = store.get.bind(store);
      let reached!: () => void;
      const inFlight = new Promise<void>((resolve) => {
        reached = resolve;
      });
      let release!: () => void;
      const held = new Promise<void>((resolve) => {
        release = resolve;
      });
      vi.spyOn(store, "get").mockImplementationOnce(async (org) => {
        const limits = await read(org);
        reached();
        await held;
        return limits;
      });
      const reading = store.cached("acme");
      await inFlight;
      await store.update("acme", { tokens: { day: 7 } }); // drops the copy being read
      release();
      expect(await reading).toEqual({ tokens: { day: 5 } });
      expect(await store.cached("acme")).toEqual({ tokens: { day: 7 } });
    } finally {
      redis.disconnect();
      await server.stop();
    }
  });
});
