import { type Limits, WINDOW_SECONDS, WINDOWS, type Window } from "@gw/core/limits";
import type { WindowState } from "@gw/core/windows";
import { RateLimiterMemory, RateLimiterRes } from "rate-limiter-flexible";

type MemoryDecision =
  | { allowed: true; windows: WindowState[] }
  | { allowed: false; refusedBy: WindowState; windows: WindowState[] };

/**
 * A key's quotas in this process's memory: the insurance when Redis fails.
 * One rate-limiter-flexible `RateLimiterMemory` per window and quota; every
 * window is consumed at once and, when any refuses, each gets its point back,
 * so a refused request counts nowhere (a changed quota starts a fresh count).
 */
export class MemoryWindows {
  private readonly limiters = new Map<string, RateLimiterMemory>();
  private readonly seconds: Record<Window, number>;

  /** `seconds` shortens windows in tests. */
  constructor(seconds: Record<Window, number> = WINDOW_SECONDS) {
    this.seconds = seconds;
  }

  async decide(keyId: string, limits: Limits): Promise<MemoryDecision> {
    const windows = this.configured(limits);
    const outcomes = await Promise.all(
      windows.map(({ limiter }) =>
        limiter.consume(keyId, 1).then(
          (res) => ({ admitted: true as const, res }),
          (res: RateLimiterRes) => ({ admitted: false as const, res }),
        ),
      ),
    );
    const states = outcomes.map((o, i) => state(windows[i]!, o.res));
    const refused = outcomes.findIndex((o) => !o.admitted);
    if (refused === -1) return { allowed: true, windows: states };
    await Promise.all(windows.map((w) => w.limiter.reward(keyId, 1)));
    const restored = states.map((s, i) =>
      outcomes[i]!.admitted ? { ...s, used: s.used - 1, remaining: s.remaining + 1 } : s,
    );
    return { allowed: false, refusedBy: restored[refused]!, windows: restored };
  }

  async peek(keyId: string, limits: Limits): Promise<WindowState[]> {
    const windows = this.configured(limits);
    return Promise.all(
      windows.map(async (w) =>
        state(w, (await w.limiter.get(keyId)) ?? new RateLimiterRes(w.points, w.seconds * 1000, 0)),
      ),
    );
  }

  private configured(limits: Limits) {
    return WINDOWS.filter((w) => limits[w] !== undefined).map((window) => {
      const points = limits[window]!;
      const seconds = this.seconds[window];
      const id = `${window}:${points}`;
      let limiter = this.limiters.get(id);
      if (!limiter) {
        limiter = new RateLimiterMemory({ keyPrefix: `gw:rl:${window}`, points, duration: seconds });
        this.limiters.set(id, limiter);
      }
      return { window, points, seconds, limiter };
    });
  }
}

function state(w: { window: Window; points: number; seconds: number }, res: RateLimiterRes): WindowState {
  const remaining = Math.max(0, Math.min(w.points, w.points - res.consumedPoints));
  return {
    scope: "key",
    unit: "requests",
    window: w.window,
    limit: w.points,
    seconds: w.seconds,
    used: w.points - remaining,
    remaining,
    resetMs: Math.max(0, res.msBeforeNext),
  };
}
