import { randomBytes } from "node:crypto";
import { ManualClock } from "@gw/core/clock";
import type { AppError } from "@gw/core/errors";
import type { Admission } from "@gw/core/internal-assertion";
import { createLogger } from "@gw/core/logger";
import { createMetrics } from "@gw/core/metrics";
import type { Principal } from "@gw/core/principal";
import { createRedis } from "@gw/core/redis";
import { CountingWindows } from "@gw/core/windows";
import { describeEachTopology, useTestRedis } from "@gw/test-kit";
import { describe, expect, it, vi } from "vitest";
import { priceBook } from "../../test/providers.ts";
import { countPromptTokens } from "../llm/tokens.ts";
import { admitModelCall, type BudgetDeps, type Caller } from "./admit-model-call.ts";
import { createBudgetMetrics } from "./budget-metrics.ts";

const MODEL = "gpt-4o-mini";
const PROMPT = [{ role: "user" as const, content: "hello there" }];
const RESERVED = (await countPromptTokens({ model: MODEL, messages: PROMPT })) + 10;

/** A caller of admission in plain values: the principal and its key's limits, as the gateway resolved them. */
function callerOf(
  keyId: string,
  limits: Admission["limits"],
  user = "alice",
  requestsCounted = false,
): Caller {
  const principal: Principal = {
    org: "acme",
    user,
    keyId,
    permissions: ["responses:write"],
    credential: "api_key",
    onBehalfOf: true,
  };
  return { principal, admission: { limits }, requestsCounted, requestId: "req_test" };
}

/** A clock whose wall time stands in 1970: no lease of another test, dated in real time, falls due on it. */
const leaseClock = () => new ManualClock(0, 1_000_000);

function deps(windows: CountingWindows, beforeReserve?: () => Promise<void>): BudgetDeps {
  return {
    windows,
    prices: priceBook(new Map([[MODEL, { input: 0.15, cachedInput: 0.075, output: 0.6 }]])),
    defaultMaxOutputTokens: 10,
    metrics: createBudgetMetrics(createMetrics(`test_${randomBytes(4).toString("hex")}`)),
    logger: createLogger("test", "silent"),
    beforeReserve,
  };
}

describeEachTopology("admission on %s Redis", (topology) => {
  const redis = useTestRedis(topology);
  const freshKey = () => `key_${randomBytes(6).toString("hex")}`;

  it("admits exactly one of two calls forced to reserve together at the edge of a token budget", async () => {
    const windows = new CountingWindows(redis.redis);
    const keyId = freshKey();
    // Room for one reservation and not two.
    const limits = { tokens: { minute: RESERVED * 2 - 1 } };
    // Both calls have counted their prompt and seen the same empty window before either reserves.
    let arrived = 0;
    let release!: () => void;
    const together = new Promise<void>((r) => {
      release = r;
    });
    const barrier = async () => {
      arrived++;
      if (arrived === 2) release();
      await together;
    };
    const outcomes = await Promise.allSettled(
      [0, 1].map(() =>
        admitModelCall(deps(windows, barrier), callerOf(keyId, limits), {
          model: MODEL,
          messages: PROMPT,
        }),
      ),
    );
    expect(arrived).toBe(2);
    const admitted = outcomes.filter((o) => o.status === "fulfilled");
    const refused = outcomes.filter((o) => o.status === "rejected");
    expect(admitted).toHaveLength(1);
    expect(refused).toHaveLength(1);
    expect(((refused[0] as PromiseRejectedResult).reason as AppError).code).toBe("rate_limited");
    // The refused call counted nowhere: only one reservation stands, and no request of the refused one.
    const states = await windows.peek(keyId, undefined, limits);
    expect(states.map((s) => s.used)).toEqual([RESERVED]);
  });

  it("counts a refused call nowhere, in any window of key or end user", async () => {
    const windows = new CountingWindows(redis.redis);
    const keyId = freshKey();
    const limits = {
      minute: 100,
      tokens: { minute: 10_000, day: RESERVED - 1 },
      endUser: { tokens: { day: 10_000 } },
    };
    const refused = await admitModelCall(deps(windows), callerOf(keyId, limits), {
      model: MODEL,
      messages: PROMPT,
    }).catch((err: AppError) => err);
    expect(refused).toMatchObject({ code: "rate_limited" });
    expect((await windows.peek(keyId, "alice", limits)).map((s) => s.used)).toEqual([0, 0, 0, 0]);
    // The refusal carries the windows' headers (the error middleware sets them), not a response object.
    expect((refused as AppError).headers["x-ratelimit-remaining-tokens"]).toBe(String(RESERVED - 1));
  });

  it("reserves tokens without counting the key's request again: the gateway counted it", async () => {
    const windows = new CountingWindows(redis.redis);
    const keyId = freshKey();
    const limits = { minute: 1, tokens: { minute: 10_000 } };
    // The window is full, but the gateway counted this request itself: only tokens are asked for here.
    await redis.redis.set(`gw:rl:{${keyId}}:minute`, 1, "PX", 60_000);
    const admitted = await admitModelCall(deps(windows), callerOf(keyId, limits, "alice", true), {
      model: MODEL,
      messages: PROMPT,
    });
    expect((await windows.peek(keyId, undefined, limits)).map((s) => s.used)).toEqual([1, RESERVED]);
    // The windows after the reservation come back as values, for the route to turn into headers: the
    // key's request windows are the gateway's, so only the tokens it reserved here.
    expect(admitted.windows.map((w) => [w.unit, w.window, w.remaining])).toEqual([
      ["tokens", "minute", 10_000 - RESERVED],
    ]);
    await admitted.settle({ input_tokens: 7, output_tokens: 3 });
    expect((await windows.peek(keyId, undefined, limits)).map((s) => s.used)).toEqual([1, 10]);
  });

  it("charges at most the reservation when the provider reports more, and counts the rest as an overrun", async () => {
    const windows = new CountingWindows(redis.redis);
    const keyId = freshKey();
    const limits = { tokens: { minute: 10_000 }, spend: { day: 1 } };
    const metrics = createMetrics(`test_${randomBytes(4).toString("hex")}`);
    const lines: string[] = [];
    const budgetDeps = {
      ...deps(windows),
      metrics: createBudgetMetrics(metrics),
      logger: createLogger("test", "warn", { write: (line: string) => void lines.push(line) }),
    };
    const admitted = await admitModelCall(budgetDeps, callerOf(keyId, limits), {
      model: MODEL,
      messages: PROMPT,
    });
    const reservedSpend = Math.round(((RESERVED - 10) * 0.15 + 10 * 0.6) * 1000) / 1e9;
    // A provider that ignored the cap of 10 reports 5,000 output tokens.
    await admitted.settle({ input_tokens: RESERVED - 10, output_tokens: 5_000 });
    const [tokens, spend] = await windows.peek(keyId, undefined, limits);
    expect(tokens!.used).toBe(RESERVED);
    expect(spend!.used).toBeCloseTo(reservedSpend, 12);
    const text = await metrics.registry.metrics();
    const overrun = (unit: string, window: string) =>
      Number(
        new RegExp(
          `_budget_reconciled_total\\{unit="${unit}",window="${window}",scope="key",direction="overrun"\\} (\\S+)`,
        ).exec(text)?.[1],
      );
    expect(overrun("tokens", "minute")).toBe(RESERVED - 10 + 5_000 - RESERVED);
    expect(overrun("spend", "day")).toBeGreaterThan(0);
    expect(lines.join("")).toContain("a model call used more than its reservation: charged the reservation");
  });

  it("settles once: a repeated settlement changes nothing more", async () => {
    const windows = new CountingWindows(redis.redis);
    const keyId = freshKey();
    const limits = { tokens: { minute: 10_000 } };
    const reserved = await windows.reserve(
      keyId,
      windows.counters(keyId, "alice", limits, { requests: 1, tokens: 500, spend: 0 }),
    );
    if (!reserved.admitted) throw new Error("not admitted");
    expect(await windows.settle(reserved.reservation, { requests: 1, tokens: 120, spend: 0 })).toBe(true);
    expect(await windows.settle(reserved.reservation, { requests: 1, tokens: 120, spend: 0 })).toBe(false);
    expect((await windows.peek(keyId, undefined, limits))[0]!.used).toBe(120);
  });

  it("refunds nothing into a window that started after the reservation's ended", async ({ expect }) => {
    // Windows of 300 ms, so one rolls over within the test.
    const windows = new CountingWindows(redis.redis, { windowMs: () => 300 });
    const keyId = freshKey();
    const limits = { tokens: { minute: 10_000 } };
    const counters = () => windows.counters(keyId, "alice", limits, { requests: 1, tokens: 500, spend: 0 });
    const old = await windows.reserve(keyId, counters());
    if (!old.admitted) throw new Error("not admitted");
    // The test's own `expect` (its parameter): `expect.poll` needs the test it runs in, and the global one
    // loses it once a test of the other topology's block, running beside this one, has ended.
    await expect
      .poll(async () => (await redis.redis.exists(counters()[0]!.key)) === 0, {
        timeout: 2_000,
        interval: 20,
      })
      .toBe(true);
    const current = await windows.reserve(keyId, counters());
    if (!current.admitted) throw new Error("not admitted");
    // The old call used nothing: its 500 would go back, but not into the new window.
    await windows.settle(old.reservation, { requests: 1, tokens: 0, spend: 0 });
    expect((await windows.peek(keyId, undefined, limits))[0]!.used).toBe(500);
    await windows.settle(current.reservation, { requests: 1, tokens: 40, spend: 0 });
    expect((await windows.peek(keyId, undefined, limits))[0]!.used).toBe(40);
  });

  describe("reservations are leases", () => {
    const PROMPT_TOKENS = RESERVED - 10;
    // A key and its end user, with request, token and spend windows; prices of 150 nano-$ a prompt token.
    const limits = {
      tokens: { day: 100_000 },
      spend: { day: 1 },
      endUser: { minute: 5, tokens: { day: 100_000 } },
    };
    const standing = async (windows: CountingWindows, keyId: string) =>
      Object.fromEntries(
        (await windows.peek(keyId, "alice", limits)).map((s) => [`${s.scope}:${s.unit}:${s.window}`, s.used]),
      );
    const afterDeath = {
      "key:tokens:day": PROMPT_TOKENS,
      "key:spend:day": (PROMPT_TOKENS * 150) / 1e9,
      "endUser:requests:minute": 1,
      "endUser:tokens:day": PROMPT_TOKENS,
    };

    it("a reservation whose holder never settles is swept once its lease expires: the prompt stays charged, the rest goes back", async () => {
      const clock = leaseClock();
      const holder = new CountingWindows(redis.redis, { clock, lease: { holder: "service-that-died" } });
      const sweeper = new CountingWindows(redis.redis, { clock, lease: { holder: "another-service" } });
      const keyId = freshKey();
      const admitted = await admitModelCall(deps(holder), callerOf(keyId, limits, "alice", true), {
        model: MODEL,
        messages: PROMPT,
      });
      // The holder dies here: it neither settles nor renews.
      expect((await standing(sweeper, keyId))["key:tokens:day"]).toBe(RESERVED);
      clock.advance(59_999);
      expect(await sweeper.sweep()).toEqual([]);
      expect((await standing(sweeper, keyId))["key:tokens:day"]).toBe(RESERVED);
      clock.advance(1);
      expect(await sweeper.sweep()).toEqual(["service-that-died"]);
      const swept = await standing(sweeper, keyId);
      expect(swept["key:spend:day"]).toBeCloseTo(afterDeath["key:spend:day"], 12);
      expect({ ...swept, "key:spend:day": 0 }).toEqual({ ...afterDeath, "key:spend:day": 0 });
      // Settled once: a later sweep and a holder that comes back change nothing more.
      expect(await sweeper.sweep()).toEqual([]);
      await admitted.settle({ input_tokens: 1, output_tokens: 1 });
      expect(await standing(sweeper, keyId)).toEqual(swept);
    });

    it("a holder that lives renews its leases: the sweep leaves them, and its own settlement counts", async () => {
      const clock = leaseClock();
      const holder = new CountingWindows(redis.redis, { clock, lease: { holder: "service-alive" } });
      const sweeper = new CountingWindows(redis.redis, { clock });
      const keyId = freshKey();
      const admitted = await admitModelCall(deps(holder), callerOf(keyId, limits, "alice", true), {
        model: MODEL,
        messages: PROMPT,
      });
      const stop = holder.keepLeases(20_000, { swept: () => undefined, error: () => undefined });
      try {
        for (let i = 0; i < 6; i++) {
          clock.advance(20_000); // a renewal falls due: let it reach Redis before the next step
          await vi.waitFor(async () =>
            expect(Number(await redis.redis.zscore("gw:rl:leases", await leaseOf(keyId)))).toBe(
              clock.wall() + 60_000,
            ),
          );
        }
        expect(await sweeper.sweep()).toEqual([]);
        await admitted.settle({ input_tokens: 7, output_tokens: 3 });
        expect((await standing(sweeper, keyId))["key:tokens:day"]).toBe(10);
        clock.advance(120_000);
        expect(await sweeper.sweep()).toEqual([]);
        expect((await standing(sweeper, keyId))["key:tokens:day"]).toBe(10);
      } finally {
        stop();
      }
    });

    it("a holder that cannot settle (Redis away from it) stops renewing: the sweep settles the lease", async () => {
      const clock = leaseClock();
      const own = createRedis(redis.server.url, {
        connectionName: "holder",
        extra: { enableOfflineQueue: false, maxRetriesPerRequest: 0 },
      });
      own.on("error", () => {});
      await new Promise((r) => own.once("ready", r));
      const holder = new CountingWindows(own, { clock, lease: { holder: "cut-off" } });
      const sweeper = new CountingWindows(redis.redis, { clock });
      const keyId = freshKey();
      const counters = holder.counters(keyId, "alice", limits, { requests: 1, tokens: 500, spend: 0 });
      const reserved = await holder.reserve(keyId, counters, {
        lease: { onExpiry: { requests: 1, tokens: 40, spend: 0 } },
      });
      if (!reserved.admitted) throw new Error("not admitted");
      own.disconnect();
      await expect(
        holder.settle(reserved.reservation, { requests: 1, tokens: 7, spend: 0 }),
      ).rejects.toThrow();
      await holder.renewLeases(); // nothing left to renew: no Redis call, no error
      clock.advance(60_000);
      expect(await sweeper.sweep()).toEqual(["cut-off"]);
      expect((await standing(sweeper, keyId))["key:tokens:day"]).toBe(40);
    });

    it("a lease whose holder died after indexing it and before counting it is dropped by the sweep", async () => {
      const clock = leaseClock();
      const sweeper = new CountingWindows(redis.redis, { clock });
      const keyId = freshKey();
      const record = `gw:rl:{${keyId}}:lease:never-counted`;
      await redis.redis.zadd("gw:rl:leases", clock.wall(), record);
      expect(await sweeper.sweep()).toEqual([]);
      expect(await redis.redis.zscore("gw:rl:leases", record)).toBeNull();
    });

    /** The record of the one lease of `keyId` (its index entry names it). */
    async function leaseOf(keyId: string): Promise<string> {
      const all = await redis.redis.zrange("gw:rl:leases", 0, -1);
      return all.find((r) => r.startsWith(`gw:rl:{${keyId}}:lease:`))!;
    }
  });
});
