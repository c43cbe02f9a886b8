import { ManualClock } from "@gw/core/clock";
import { policyHeader, rateLimitHeader, secondsUntil } from "@gw/core/http";
import type { Limits } from "@gw/core/limits";
import { createLogger } from "@gw/core/logger";
import { createRedis, type RedisClient } from "@gw/core/redis";
import { CountingWindows } from "@gw/core/windows";
import {
  describeEachTopology,
  monitorCommands,
  redisStartedEarly,
  startTestRedisOf,
  type TestRedisStore,
} from "@gw/test-kit";
import type { Cluster, Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { createGatewayMetrics } from "../metrics.ts";
import { MemoryWindows } from "./memory-windows.ts";
import { RequestWindows } from "./request-windows.ts";

let n = 0;
const key = () => `key_test_${n++}_${Date.now()}`;
/** Short windows, so the longer ones turn over within a test. */
const SHORT = { second: 1, minute: 2, hour: 3, day: 4 };

describeEachTopology("on %s Redis", (topology) => {
  let server: TestRedisStore;
  let redis: RedisClient;

  const serverStarted = redisStartedEarly(topology);
  beforeAll(async () => {
    server = await serverStarted();
    redis = createRedis(server.url, {
      connectionName: "limiter-test",
      extra: { enableAutoPipelining: true },
    });
    await redis.ping();
  });
  afterAll(async () => {
    redis.disconnect();
    await server.stop();
  });

  /** How many times `run` writes to the Redis connections (every node's, on a cluster): its round trips. */
  async function roundTrips<T>(run: () => Promise<T>): Promise<{ result: T; writes: number }> {
    const nodes = topology === "cluster" ? (redis as Cluster).nodes("master") : [redis as Redis];
    await Promise.all(nodes.map((node) => node.ping())); // every connection open before counting
    const connections = nodes.map(
      (c) => (c as unknown as { stream: { write: (...args: unknown[]) => boolean } }).stream,
    );
    const writes = { count: 0 };
    const originals = connections.map((stream) => {
      const write = stream.write.bind(stream);
      stream.write = (...args: unknown[]) => {
        writes.count++;
        return write(...args);
      };
      return write;
    });
    try {
      return { result: await run(), writes: writes.count };
    } finally {
      connections.forEach((stream, i) => {
        stream.write = originals[i]!;
      });
    }
  }

  const counters = async (id: string, windows: string[]) =>
    Object.fromEntries(
      await Promise.all(windows.map(async (w) => [w, await redis.get(`gw:rl-test:{${id}}:${w}`)])),
    );

  /** The core counting module, as the gateway's request windows use it (the windows of `gw:rl-test`). */
  const counting = (seconds?: Record<string, number>) =>
    new CountingWindows(redis, {
      prefix: "gw:rl-test",
      ...(seconds ? { windowMs: (_unit: string, w: string) => seconds[w]! * 1000 } : {}),
    });
  /** One request counted in every request window of `limits`, or nowhere. */
  const countOne = (windows: CountingWindows, id: string, limits: Limits) =>
    windows.reserve(id, windows.counters(id, undefined, limits, { requests: 1 }), { final: true });

  describe("request windows in Redis (CountingWindows)", () => {
    it("decides all four windows in one round trip, admitted or refused", async () => {
      const limiter = counting();
      const limits = { second: 1, minute: 10, hour: 10, day: 10 };
      await countOne(limiter, key(), limits); // loads the script into Redis
      const id = key();
      const admitted = await roundTrips(() => countOne(limiter, id, limits));
      expect(admitted.result.admitted).toBe(true);
      expect(admitted.writes).toBe(1);
      const refused = await roundTrips(() => countOne(limiter, id, limits));
      expect(refused.result.admitted).toBe(false);
      expect(refused.writes).toBe(1);
    });

    it("counts a refused request nowhere, not even for a moment: the script writes only when every window has room", async () => {
      const limiter = counting();
      const id = key();
      const limits = { hour: 100, minute: 2, day: 100 };
      await countOne(limiter, id, limits);
      await countOne(limiter, id, limits);
      const before = await counters(id, ["hour", "minute", "day"]);
      expect(before).toEqual({ hour: "2", minute: "2", day: "2" });
      // Every write Redis carries out is seen here: a refusal must cause none.
      const monitor = await monitorCommands(server);
      try {
        const refused = await countOne(limiter, id, limits);
        expect(refused.admitted).toBe(false);
      } finally {
        await monitor.stop();
      }
      expect(monitor.commands.map(([c]) => c)).toContain("evalsha");
      expect(
        monitor.commands.filter(([c]) =>
          ["set", "incrby", "incr", "decrby", "expire", "pexpire", "hset"].includes(c!),
        ),
      ).toEqual([]);
      expect(await counters(id, ["hour", "minute", "day"])).toEqual(before);
    });

    it("keeps no record of a request decided on its own (only leases and budget reservations are settled later)", async () => {
      const limiter = new RequestWindows(counting());
      const id = key();
      const limits = { minute: 100, day: 100 }; // leases of 1: none
      const monitor = await monitorCommands(server);
      try {
        expect((await limiter.decide(id, limits)).allowed).toBe(true);
      } finally {
        await monitor.stop();
      }
      expect(monitor.commands.map(([c]) => c)).toContain("set"); // counted, in the script
      expect(monitor.commands.filter(([c]) => ["hset", "pexpire"].includes(c!))).toEqual([]);
      expect(await counters(id, ["minute", "day"])).toEqual({ minute: "1", day: "1" });
    });

    it("peeks without starting a window", async () => {
      const limiter = counting();
      const id = key();
      const states = await limiter.peek(id, undefined, { second: 5, day: 7 });
      expect(states.map((s) => [s.window, s.remaining])).toEqual([
        ["second", 5],
        ["day", 7],
      ]);
      expect(await redis.exists(`gw:rl-test:{${id}}:second`, `gw:rl-test:{${id}}:day`)).toBe(0);
    });

    it("never admits more than the tightest quota under concurrency, and refusals count nowhere", async () => {
      const limiter = counting();
      const id = key();
      const limits = { second: 50, minute: 30, hour: 1000 };
      const decisions = await Promise.all(Array.from({ length: 100 }, () => countOne(limiter, id, limits)));
      expect(decisions.filter((d) => d.admitted)).toHaveLength(30);
      const refused = decisions.find((d) => !d.admitted);
      expect(refused && !refused.admitted && refused.refusedBy.window).toBe("minute");
      const peek = Object.fromEntries(
        (await limiter.peek(id, undefined, limits)).map((w) => [w.window, w.limit - w.remaining]),
      );
      expect(peek).toEqual({ second: 30, minute: 30, hour: 30 });
    });

    it("reports the refusing window's time to reset, and longer windows reset when they end", async () => {
      const limiter = counting(SHORT);
      const id = key();
      const limits = { second: 5, hour: 2 }; // hour is 3 s here
      expect((await countOne(limiter, id, limits)).admitted).toBe(true);
      expect((await countOne(limiter, id, limits)).admitted).toBe(true);
      const refused = await countOne(limiter, id, limits);
      expect(refused.admitted).toBe(false);
      if (refused.admitted) return;
      expect(refused.refusedBy.window).toBe("hour");
      expect(refused.refusedBy.resetMs).toBeGreaterThan(0);
      expect(refused.refusedBy.resetMs).toBeLessThanOrEqual(3_000);
      // Real time: Redis ends the window (its key expires), and only then admits again.
      await new Promise((r) => setTimeout(r, refused.refusedBy.resetMs + 100));
      expect((await countOne(limiter, id, limits)).admitted).toBe(true);
    });
  });

  describe("remembered refusals", () => {
    it("answer a refused key locally until its window resets on the clock, then ask Redis again", async () => {
      const clock = new ManualClock();
      const limiter = new RequestWindows(counting(), { clock });
      const id = key();
      const limits = { minute: 1, day: 100 };
      expect((await limiter.decide(id, limits)).allowed).toBe(true);
      const first = await roundTrips(() => limiter.decide(id, limits));
      expect(first.result.allowed).toBe(false);
      expect(first.writes).toBe(1);
      if (first.result.allowed) throw new Error("expected a refusal");
      const resetMs = first.result.refusedBy.resetMs;
      clock.advance(resetMs - 1_000);
      const remembered = await roundTrips(() => limiter.decide(id, limits));
      expect(remembered.writes).toBe(0);
      expect(remembered.result).toMatchObject({
        allowed: false,
        refusedBy: { window: "minute", remaining: 0, resetMs: 1_000 },
        store: "local",
      });

      // Other limits (the key was changed) are asked afresh.
      expect((await roundTrips(() => limiter.decide(id, { minute: 2, day: 100 }))).writes).toBe(1);
      // At the reset, Redis decides again (here its window is ended by hand: admitted).
      clock.advance(1_000);
      await redis.del(`gw:rl-test:{${id}}:minute`);
      const after = await roundTrips(() => limiter.decide(id, limits));
      expect(after.writes).toBe(1);
      expect(after.result.allowed).toBe(true);
    });

    it("in real time, a remembered refusal ends with Redis's window", async () => {
      const limiter = new RequestWindows(counting(SHORT));
      const id = key();
      const limits = { second: 1, day: 100 };
      expect((await limiter.decide(id, limits)).allowed).toBe(true);
      const refused = await limiter.decide(id, limits);
      if (refused.allowed) throw new Error("expected a refusal");
      await new Promise((r) => setTimeout(r, refused.refusedBy.resetMs + 50));
      const after = await roundTrips(() => limiter.decide(id, limits));
      expect(after.writes).toBe(1);
      expect(after.result.allowed).toBe(true);
    });
  });

  describe("leases for heavy keys", () => {
    const leases = { share: 0.01, maxPoints: 64, maxMs: 150 };

    it("take a share of the quota in one round trip and use it without Redis until spent", async () => {
      // The clock stands still: the lease cannot lapse however slow the machine is.
      const limiter = new RequestWindows(counting(), { leases, clock: new ManualClock() });
      const id = key();
      const limits = { minute: 10_000, day: 500 }; // smallest quota 500: leases of 5
      expect(limiter.leasePoints(limits)).toBe(5);
      const first = await roundTrips(() => limiter.decide(id, limits));
      expect(first).toMatchObject({ writes: 1, result: { allowed: true, store: "lease" } });
      expect(await counters(id, ["minute", "day"])).toEqual({ minute: "5", day: "5" });
      for (let i = 0; i < 4; i++) {
        const local = await roundTrips(() => limiter.decide(id, limits));
        expect(local).toMatchObject({ writes: 0, result: { allowed: true, store: "lease" } });
      }
      // Spent: the next request takes a new lease.
      expect((await roundTrips(() => limiter.decide(id, limits))).writes).toBe(1);
      expect(await counters(id, ["minute", "day"])).toEqual({ minute: "10", day: "10" });
    });

    it("use a lease for maxMs on the clock, then give what is left back and take a new one", async () => {
      const clock = new ManualClock();
      const limiter = new RequestWindows(counting(), { leases, clock });
      const id = key();
      const limits = { minute: 1_000 }; // leases of 10
      expect((await roundTrips(() => limiter.decide(id, limits))).writes).toBe(1);
      clock.advance(leases.maxMs - 1);
      const local = await roundTrips(() => limiter.decide(id, limits));
      expect(local).toMatchObject({ writes: 0, result: { allowed: true, store: "lease" } });
      expect(local.result.windows[0]!.resetMs).toBe(60_000 - (leases.maxMs - 1));
      expect(await counters(id, ["minute"])).toEqual({ minute: "10" });
      clock.advance(1); // the lease lapses: its 8 unused points go back
      await vi.waitFor(async () => expect(await counters(id, ["minute"])).toEqual({ minute: "2" }), {
        timeout: 10_000,
        interval: 20,
      });
      expect((await roundTrips(() => limiter.decide(id, limits))).writes).toBe(1);
      expect(await counters(id, ["minute"])).toEqual({ minute: "12" });
    });

    it("give unused points back when the lease lapses, so no count outlives its request for long", async () => {
      const errors: unknown[] = [];
      // The clock stands still until told: a slow machine cannot lapse the lease between the two requests.
      const clock = new ManualClock();
      const limiter = new RequestWindows(counting(), {
        leases,
        clock,
        onGiveBackError: (err) => errors.push(err),
      });
      const id = key();
      const limits = { minute: 1_000 }; // leases of 10
      await limiter.decide(id, limits);
      await limiter.decide(id, limits);
      expect(await counters(id, ["minute"])).toEqual({ minute: "10" });
      // No request follows: the lapse alone gives the 8 unused points back.
      clock.advance(leases.maxMs);
      await vi.waitFor(
        async () => expect(await counters(id, ["minute"]), String(errors)).toEqual({ minute: "2" }),
        { timeout: 10_000, interval: 20 },
      );
    });

    it("on close, a give-back waiting to be retried is tried once more and then not again: nothing is left to run on a closed connection", async () => {
      const clock = new ManualClock();
      const own = createRedis(server.url, { connectionName: "limiter-test-closing" });
      own.on("error", () => {});
      const windows = new CountingWindows(own, { prefix: "gw:rl-test", clock });
      const settle = vi.spyOn(windows, "settle");
      const errors: unknown[] = [];
      const limiter = new RequestWindows(windows, {
        leases,
        clock,
        onGiveBackError: (err) => errors.push(err),
      });
      const limits = { minute: 1_000 }; // leases of 10
      expect(await limiter.decide(key(), limits)).toMatchObject({ store: "lease" });
      expect(clock.pending, "the lease's lapse is due on the clock").toBe(1);
      own.disconnect();
      // The lease lapses: its give-back is tried at once (the clock runs the lapse in `advance`), fails
      // on the closed connection and waits on the clock to be tried again.
      clock.advance(leases.maxMs);
      expect(settle, "the lapse tried the give-back").toHaveBeenCalledTimes(1);
      await vi.waitFor(() => expect(clock.pending).toBe(1), { timeout: 10_000, interval: 5 });
      expect(settle).toHaveBeenCalledTimes(1);
      await limiter.close();
      expect(settle).toHaveBeenCalledTimes(2);
      expect(errors).toHaveLength(1);
      expect(clock.pending).toBe(0);
      clock.advance(60_000);
      expect(settle).toHaveBeenCalledTimes(2);
    });

    it("near a limit, every request is decided in Redis: no lease once a window would be over half full", async () => {
      const limiter = new RequestWindows(counting(), { leases });
      const id = key();
      const limits = { minute: 400 }; // leases of 4 while at most 200 are counted
      await redis.set(`gw:rl-test:{${id}}:minute`, 197, "PX", 60_000);
      const decision = await limiter.decide(id, limits);
      expect(decision).toMatchObject({ allowed: true }); // 197 + 4 > 200: one point, no lease
      expect(decision.store).toBe("redis");
      expect(await counters(id, ["minute"])).toEqual({ minute: "198" });
      expect((await roundTrips(() => limiter.decide(id, limits))).writes).toBe(1);
    });

    it("a give-back runs once per lease: retrying it after a lost answer gives nothing back twice", async () => {
      const windows = counting();
      const id = key();
      const counters1 = windows.counters(id, undefined, { minute: 1_000 }, { requests: 1 });
      const taken = await windows.reserve(id, counters1, { times: 10 });
      if (!taken.admitted) throw new Error("expected a lease");
      expect(taken.times).toBe(10);
      expect(await windows.settle(taken.reservation, { requests: 3 })).toBe(true); // 7 unused go back
      expect(await windows.settle(taken.reservation, { requests: 3 })).toBe(false);
      expect(await counters(id, ["minute"])).toEqual({ minute: "3" });
      const next = await windows.reserve(id, counters1, { times: 10 });
      if (!next.admitted) throw new Error("expected a lease");
      await windows.settle(next.reservation, { requests: 8 }); // another lease gives back on its own
      expect(await counters(id, ["minute"])).toEqual({ minute: "11" });
    });

    it("a point given back to a window that has ended since is dropped", async () => {
      const windows = counting(SHORT);
      const id = key();
      const perSecond = windows.counters(id, undefined, { second: 1_000 }, { requests: 1 });
      const taken = await windows.reserve(id, perSecond, { times: 10 });
      if (!taken.admitted) throw new Error("expected a lease");
      expect(taken.times).toBe(10);
      // The window ends (its key goes, as at expiry) and a later, longer one starts.
      await redis.del(`gw:rl-test:{${id}}:second`);
      await redis.set(`gw:rl-test:{${id}}:second`, 0, "PX", 60_000);
      await windows.reserve(id, perSecond); // the new window, counting 1
      await windows.settle(taken.reservation, { requests: 1 }); // 9 would go back
      expect(await counters(id, ["second"])).toEqual({ second: "1" });
    });

    it("two replicas sharing one Redis never admit more than the quota, and what is left over goes back", async () => {
      const other = createRedis(server.url, {
        connectionName: "limiter-test-2",
        extra: { enableAutoPipelining: true },
      });
      try {
        const replicas = [redis, other].map(
          (r) => new RequestWindows(new CountingWindows(r, { prefix: "gw:rl-test" }), { leases }),
        );
        const id = key();
        const limits = { minute: 400, day: 100_000 };
        const burst = () =>
          Promise.all(Array.from({ length: 600 }, (_, i) => replicas[i % 2]!.decide(id, limits)));
        const first = (await burst()).filter((d) => d.allowed).length;
        expect(first).toBeLessThanOrEqual(400);
        // Once every lease has lapsed and given its rest back, Redis counts exactly what was admitted.
        await vi.waitFor(
          async () => expect(await counters(id, ["minute"])).toEqual({ minute: String(first) }),
          {
            timeout: 10_000,
            interval: 20,
          },
        );
        const again = (await burst()).filter((d) => d.allowed).length;
        expect(first + again).toBe(400);
        expect(await counters(id, ["minute", "day"])).toEqual({ minute: "400", day: "400" });
      } finally {
        other.disconnect();
      }
    });
  });
});

describe("the insured limiter", () => {
  it("after a store failure, decides in memory for a second on the clock, then tries Redis again", async () => {
    const server = await startTestRedisOf("single");
    const own = createRedis(server.url, {
      connectionName: "limiter-test-outage",
      extra: { enableOfflineQueue: false, maxRetriesPerRequest: 0, retryStrategy: () => null },
    });
    own.on("error", () => {});
    await new Promise((r) => own.once("ready", r));
    const clock = new ManualClock();
    const limiter = new RequestWindows(new CountingWindows(own, { prefix: "gw:rl-test" }), {
      mode: "open",
      metrics: createGatewayMetrics(),
      logger: createLogger("test", "silent"),
      clock,
    });
    const id = key();
    const limits = { minute: 2 };
    try {
      expect((await limiter.decide(id, limits)).allowed).toBe(true); // in Redis
      const ended = new Promise((r) => own.once("end", r));
      own.disconnect();
      await ended;
      expect((await limiter.decide(id, limits)).allowed).toBe(true); // Redis fails: in memory
      await own.connect();
      clock.advance(999);
      expect((await limiter.decide(id, limits)).allowed).toBe(true); // Redis is left alone
      expect(await own.get(`gw:rl-test:{${id}}:minute`)).toBe("1");
      clock.advance(1);
      expect((await limiter.decide(id, limits)).allowed).toBe(true); // Redis again
      expect(await own.get(`gw:rl-test:{${id}}:minute`)).toBe("2");
    } finally {
      own.disconnect();
      await server.stop();
    }
  });
});

describe("MemoryWindows (the insurance)", () => {
  it("enforces the same quotas with the same all-or-nothing counting", async () => {
    const limiter = new MemoryWindows();
    const id = key();
    const limits = { second: 4, day: 100 };
    const decisions = await Promise.all(Array.from({ length: 20 }, () => limiter.decide(id, limits)));
    expect(decisions.filter((d) => d.allowed)).toHaveLength(4);
    const peek = Object.fromEntries(
      (await limiter.peek(id, limits)).map((w) => [w.window, w.limit - w.remaining]),
    );
    expect(peek).toEqual({ second: 4, day: 4 });
  });
});

describe("rate-limit headers", () => {
  const windows = [
    { window: "second" as const, limit: 5, seconds: 1, remaining: 3, resetMs: 400 },
    { window: "day" as const, limit: 1000, seconds: 86_400, remaining: 2, resetMs: 3_600_500 },
  ];
  it("lists every quota and picks the tightest window", () => {
    expect(policyHeader(windows)).toBe('"second";q=5;w=1, "day";q=1000;w=86400');
    expect(rateLimitHeader(windows)).toBe('"day";r=2;t=3601');
    expect(rateLimitHeader([windows[0]!, { ...windows[1]!, remaining: 3 }])).toBe('"second";r=3;t=1');
  });
  it("rounds Retry-After up to whole seconds, never 0", () => {
    expect(secondsUntil(0)).toBe(1);
    expect(secondsUntil(1_001)).toBe(2);
    expect(secondsUntil(59_000)).toBe(59);
  });
});
