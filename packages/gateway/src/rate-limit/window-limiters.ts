import { type Limits, WINDOW_SECONDS, WINDOWS, type Window } from "@gw/core";
import type { Redis } from "ioredis";
import { RateLimiterMemory, RateLimiterRedis, RateLimiterRes } from "rate-limiter-flexible";
import { type Decision, type QuotaLimiter, QuotaStoreError, type WindowState } from "./quota.ts";

type WindowLimiter = RateLimiterRedis | RateLimiterMemory;

/**
 * The increment script given to rate-limiter-flexible's RateLimiterRedis
 * (`customIncrTtlLuaScript`): a request that does not fit is not counted, so
 * a refused request never burns the refusing window. It reports the count
 * the request would have made, which the library reads as a refusal. A point
 * given back to a window that has meanwhile ended is dropped, so it cannot
 * open the next window one request short.
 * ARGV: points to add (negative to give back), window seconds, quota.
 */
export const FITS_OR_NOTHING = `
local points = tonumber(ARGV[1])
if points < 0 and redis.call('exists', KEYS[1]) == 0 then
  return {0, 0}
end
redis.call('set', KEYS[1], 0, 'EX', ARGV[2], 'NX')
local current = tonumber(redis.call('get', KEYS[1]))
local ttl = redis.call('pttl', KEYS[1])
if ttl < 0 then
  redis.call('expire', KEYS[1], ARGV[2])
  ttl = 1000 * tonumber(ARGV[2])
end
if points > 0 and current + points > tonumber(ARGV[3]) then
  return {current + points, ttl}
end
return {redis.call('incrby', KEYS[1], points), ttl}
`;

/**
 * One rate-limiter-flexible limiter per window and quota, combined per key:
 * every window is consumed at once (on Redis, ioredis auto-pipelining makes
 * that one round trip), and when any window refuses, the windows that had
 * admitted the request are given their point back, so a refused request
 * counts nowhere. In Redis the counters of a window are shared by all its
 * quotas, so a changed quota applies to the current window from the key's
 * next request (in memory a changed quota starts a fresh count).
 */
export class WindowLimiters implements QuotaLimiter {
  private readonly limiters = new Map<string, WindowLimiter>();
  private readonly create: (window: Window, points: number, seconds: number) => WindowLimiter;
  private readonly seconds: Record<Window, number>;
  /** Memory limiters count refused requests too; Redis ones (with the script above) do not. */
  private readonly countsRefusals: boolean;

  private constructor(
    create: (window: Window, points: number, seconds: number) => WindowLimiter,
    countsRefusals: boolean,
    seconds: Record<Window, number>,
  ) {
    this.create = create;
    this.countsRefusals = countsRefusals;
    this.seconds = seconds;
  }

  /** Windows in Redis, exact across every replica that shares it. `seconds` shortens windows in tests. */
  static redis(
    redis: Redis,
    prefix = "gw:rl",
    seconds: Record<Window, number> = WINDOW_SECONDS,
  ): WindowLimiters {
    return new WindowLimiters(
      (window, points, duration) =>
        new RateLimiterRedis({
          storeClient: redis,
          keyPrefix: `${prefix}:${window}`,
          points,
          duration,
          customIncrTtlLuaScript: FITS_OR_NOTHING,
          rejectIfRedisNotReady: true,
        }),
      false,
      seconds,
    );
  }

  /** Windows in this process's memory: the insurance when Redis fails. */
  static memory(seconds: Record<Window, number> = WINDOW_SECONDS): WindowLimiters {
    return new WindowLimiters(
      (window, points, duration) => new RateLimiterMemory({ keyPrefix: `gw:rl:${window}`, points, duration }),
      true,
      seconds,
    );
  }

  async decide(keyId: string, limits: Limits): Promise<Decision> {
    const windows = this.configured(limits);
    const outcomes = await Promise.all(
      windows.map(({ limiter }) =>
        limiter.consume(keyId, 1).then(
          (res) => ({ admitted: true as const, res }),
          (err: unknown) => {
            if (err instanceof RateLimiterRes) return { admitted: false as const, res: err };
            throw new QuotaStoreError(err);
          },
        ),
      ),
    );
    const states = outcomes.map((o, i) => state(windows[i]!, o.res));
    const refused = outcomes.findIndex((o) => !o.admitted);
    if (refused === -1) return { allowed: true, windows: states };

    await Promise.all(
      outcomes.map((o, i) =>
        o.admitted || this.countsRefusals
          ? windows[i]!.limiter.reward(keyId, 1).catch(() => undefined)
          : undefined,
      ),
    );
    const restored = states.map((s, i) => (outcomes[i]!.admitted ? { ...s, remaining: s.remaining + 1 } : s));
    return { allowed: false, refusedBy: restored[refused]!, windows: restored };
  }

  async peek(keyId: string, limits: Limits): Promise<WindowState[]> {
    const windows = this.configured(limits);
    return Promise.all(
      windows.map(async (w) => {
        try {
          const res = await w.limiter.get(keyId);
          return state(w, res ?? new RateLimiterRes(w.points, w.seconds * 1000, 0));
        } catch (err) {
          throw new QuotaStoreError(err);
        }
      }),
    );
  }

  private configured(limits: Limits) {
    return WINDOWS.filter((w) => limits[w] !== undefined).map((window) => {
      const points = limits[window]!;
      const seconds = this.seconds[window];
      const id = `${window}:${points}`;
      let limiter = this.limiters.get(id);
      if (!limiter) {
        limiter = this.create(window, points, seconds);
        this.limiters.set(id, limiter);
      }
      return { window, points, seconds, limiter };
    });
  }
}

function state(w: { window: Window; points: number; seconds: number }, res: RateLimiterRes): WindowState {
  return {
    window: w.window,
    limit: w.points,
    seconds: w.seconds,
    remaining: Math.max(0, Math.min(w.points, w.points - res.consumedPoints)),
    resetMs: Math.max(0, res.msBeforeNext),
  };
}
