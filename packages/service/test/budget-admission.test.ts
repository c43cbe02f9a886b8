import { randomBytes } from "node:crypto";
import { BudgetWindows } from "@gw/core/budget-windows";
import type { AppError } from "@gw/core/errors";
import type { Admission } from "@gw/core/internal-assertion";
import { createLogger } from "@gw/core/logger";
import { createMetrics } from "@gw/core/metrics";
import type { Principal } from "@gw/core/principal";
import { REDIS_TOPOLOGIES, useTestRedis } from "@gw/test-kit";
import { describe, expect, it } from "vitest";
import { admitModelCall, type BudgetDeps, type Caller } from "../src/budgets/admit-model-call.ts";
import { createBudgetMetrics } from "../src/budgets/budget-metrics.ts";
import { countPromptTokens } from "../src/llm/tokens.ts";

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
  return { principal, admission: { limits, requestsCounted }, requestId: "req_test" };
}

function deps(windows: BudgetWindows, beforeReserve?: () => Promise<void>): BudgetDeps {
  return {
    windows,
    prices: new Map([[MODEL, { input: 0.15, cachedInput: 0.075, output: 0.6 }]]),
    defaultMaxOutputTokens: 10,
    metrics: createBudgetMetrics(createMetrics(`test_${randomBytes(4).toString("hex")}`)),
    logger: createLogger("test", "silent"),
    beforeReserve,
  };
}

describe.each(REDIS_TOPOLOGIES)("admission on %s Redis", (topology) => {
  const redis = useTestRedis(topology);
  const freshKey = () => `key_${randomBytes(6).toString("hex")}`;

  it("admits exactly one of two calls forced to reserve together at the edge of a token budget", async () => {
    const windows = new BudgetWindows(redis.redis);
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
    const windows = new BudgetWindows(redis.redis);
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

  it("reserves tokens without counting the request again when the gateway already counted it", async () => {
    const windows = new BudgetWindows(redis.redis);
    const keyId = freshKey();
    const limits = { minute: 1, tokens: { minute: 10_000 } };
    // The window is full, but the gateway counted this request itself: only tokens are asked for here.
    await redis.redis.set(`gw:rl:{${keyId}}:minute`, 1, "PX", 60_000);
    const admitted = await admitModelCall(deps(windows), callerOf(keyId, limits, "alice", true), {
      model: MODEL,
      messages: PROMPT,
    });
    expect((await windows.peek(keyId, undefined, limits)).map((s) => s.used)).toEqual([1, RESERVED]);
    // The windows after the reservation come back as values, for the route to turn into headers.
    expect(admitted.windows.map((w) => [w.unit, w.window, w.remaining])).toEqual([
      ["requests", "minute", 0],
      ["tokens", "minute", 10_000 - RESERVED],
    ]);
    await admitted.settle({ input_tokens: 7, output_tokens: 3 });
    expect((await windows.peek(keyId, undefined, limits)).map((s) => s.used)).toEqual([1, 10]);
  });

  it("settles once: a repeated settlement changes nothing more", async () => {
    const windows = new BudgetWindows(redis.redis);
    const keyId = freshKey();
    const limits = { tokens: { minute: 10_000 } };
    const reserved = await windows.reserve(
      keyId,
      windows.counters(keyId, "alice", limits, { requests: 1, tokens: 500, spend: 0 }),
    );
    if (!reserved.admitted) throw new Error("not admitted");
    expect(await windows.settle(reserved.reservation, { requests: 1, tokens: 120, spend: 0 }, "s1")).toBe(
      true,
    );
    expect(await windows.settle(reserved.reservation, { requests: 1, tokens: 120, spend: 0 }, "s1")).toBe(
      false,
    );
    expect((await windows.peek(keyId, undefined, limits))[0]!.used).toBe(120);
  });

  it("refunds nothing into a window that started after the reservation's ended", async () => {
    // Windows of 300 ms, so one rolls over within the test.
    const windows = new BudgetWindows(redis.redis, "gw:rl", () => 300);
    const keyId = freshKey();
    const limits = { tokens: { minute: 10_000 } };
    const counters = () => windows.counters(keyId, "alice", limits, { requests: 1, tokens: 500, spend: 0 });
    const old = await windows.reserve(keyId, counters());
    if (!old.admitted) throw new Error("not admitted");
    await expect
      .poll(async () => (await redis.redis.exists(counters()[0]!.key)) === 0, {
        timeout: 2_000,
        interval: 20,
      })
      .toBe(true);
    const current = await windows.reserve(keyId, counters());
    if (!current.admitted) throw new Error("not admitted");
    // The old call used nothing: its 500 would go back, but not into the new window.
    await windows.settle(old.reservation, { requests: 1, tokens: 0, spend: 0 }, "old");
    expect((await windows.peek(keyId, undefined, limits))[0]!.used).toBe(500);
    await windows.settle(current.reservation, { requests: 1, tokens: 40, spend: 0 }, "current");
    expect((await windows.peek(keyId, undefined, limits))[0]!.used).toBe(40);
  });
});
