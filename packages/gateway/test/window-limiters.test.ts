import { createRedis } from "@gw/core";
import { startTestRedis } from "@gw/devstack/testing";
import type { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { policyHeader, rateLimitHeader, secondsUntil } from "../src/rate-limit/headers.ts";
import { FITS_OR_NOTHING, WindowLimiters } from "../src/rate-limit/window-limiters.ts";

let server: Awaited<ReturnType<typeof startTestRedis>>;
let redis: Redis;
let n = 0;
const key = () => `key_test_${n++}_${Date.now()}`;
/** Short windows, so the longer ones turn over within a test. */
const SHORT = { second: 1, minute: 2, hour: 3, day: 4 };

beforeAll(async () => {
  server = await startTestRedis();
  redis = createRedis(server.url, { connectionName: "limiter-test", extra: { enableAutoPipelining: true } });
  await redis.ping();
});
afterAll(async () => {
  redis.disconnect();
  await server.stop();
});

describe("WindowLimiters on Redis", () => {
  it("decides all four windows in one round trip", async () => {
    const limiter = WindowLimiters.redis(redis, "gw:rl-test");
    const limits = { second: 10, minute: 10, hour: 10, day: 10 };
    await limiter.decide(key(), limits); // loads the script into Redis
    const id = key();
    const stream = (redis as unknown as { stream: { write: (...args: unknown[]) => boolean } }).stream;
    const write = stream.write.bind(stream);
    let writes = 0;
    stream.write = (...args: unknown[]) => {
      writes++;
      return write(...args);
    };
    try {
      const decision = await limiter.decide(id, limits);
      expect(decision.allowed).toBe(true);
      expect(writes).toBe(1);
    } finally {
      stream.write = write;
    }
  });

  it("never admits more than the tightest quota under concurrency, and refusals count nowhere", async () => {
    const limiter = WindowLimiters.redis(redis, "gw:rl-test");
    const id = key();
    const limits = { second: 50, minute: 30, hour: 1000 };
    const decisions = await Promise.all(Array.from({ length: 100 }, () => limiter.decide(id, limits)));
    expect(decisions.filter((d) => d.allowed)).toHaveLength(30);
    const refused = decisions.find((d) => !d.allowed);
    expect(refused && !refused.allowed && refused.refusedBy.window).toBe("minute");
    const peek = Object.fromEntries(
      (await limiter.peek(id, limits)).map((w) => [w.window, w.limit - w.remaining]),
    );
    expect(peek).toEqual({ second: 30, minute: 30, hour: 30 });
  });

  it("reports the refusing window's time to reset, and longer windows reset when they end", async () => {
    const limiter = WindowLimiters.redis(redis, "gw:rl-test", SHORT);
    const id = key();
    const limits = { second: 5, hour: 2 }; // hour is 3 s here
    expect((await limiter.decide(id, limits)).allowed).toBe(true);
    expect((await limiter.decide(id, limits)).allowed).toBe(true);
    const refused = await limiter.decide(id, limits);
    expect(refused.allowed).toBe(false);
    if (refused.allowed) return;
    expect(refused.refusedBy.window).toBe("hour");
    expect(refused.refusedBy.resetMs).toBeGreaterThan(1_000);
    expect(refused.refusedBy.resetMs).toBeLessThanOrEqual(3_000);
    await new Promise((r) => setTimeout(r, refused.refusedBy.resetMs + 100));
    expect((await limiter.decide(id, limits)).allowed).toBe(true);
  });
});

describe("the increment script", () => {
  it("does not count a request that does not fit, and drops a point given back to an ended window", async () => {
    const k = `script-${key()}`;
    expect(await redis.eval(FITS_OR_NOTHING, 1, k, 1, 60, 1)).toEqual([1, 60_000]);
    const [refused] = (await redis.eval(FITS_OR_NOTHING, 1, k, 1, 60, 1)) as [number, number];
    expect(refused).toBe(2); // reported as over the quota...
    expect(await redis.get(k)).toBe("1"); // ...but not counted
    expect(await redis.eval(FITS_OR_NOTHING, 1, `${k}-gone`, -1, 60, 1)).toEqual([0, 0]);
    expect(await redis.exists(`${k}-gone`)).toBe(0);
  });
});

describe("WindowLimiters in memory (the insurance)", () => {
  it("enforces the same quotas with the same all-or-nothing counting", async () => {
    const limiter = WindowLimiters.memory();
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
