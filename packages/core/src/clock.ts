/**
 * A time source for limiter, lease, cache and lock logic, in milliseconds
 * from an arbitrary start, never going back. Logic reads it instead of the
 * wall clock, so tests move time instead of sleeping (as envoy ratelimit's
 * `TimeSource` and unkey's test clock).
 */
export interface Clock {
  now(): number;
  /**
   * Milliseconds since the epoch, for what is compared with times stored or
   * sent elsewhere (a grant's expiry in SpiceDB, a record's creation); moves
   * with `now` on a manual clock.
   */
  wall(): number;
  /** Runs `fn` once `ms` have passed on this clock; the function returned cancels it. Never keeps the process alive. */
  schedule(ms: number, fn: () => void): () => void;
}

/** Real time: `performance.now()` and unreferenced timers. */
export const systemClock: Clock = {
  now: () => performance.now(),
  wall: () => Date.now(),
  schedule(ms, fn) {
    const timer = setTimeout(fn, ms).unref();
    return () => clearTimeout(timer);
  },
};

/** A clock that stands still until `advance` moves it, running what falls due (for tests). */
export class ManualClock implements Clock {
  private time: number;
  private readonly start: number;
  private readonly wallStart: number;
  private readonly timers = new Set<{ at: number; fn: () => void }>();

  /** `wallStart`: its wall time at `start` (default: the real time now, as SpiceDB's expirations use). */
  constructor(start = 1_000_000, wallStart = Date.now()) {
    this.time = start;
    this.start = start;
    this.wallStart = wallStart;
  }

  now(): number {
    return this.time;
  }

  wall(): number {
    return this.wallStart + (this.time - this.start);
  }

  schedule(ms: number, fn: () => void): () => void {
    const timer = { at: this.time + Math.max(0, ms), fn };
    this.timers.add(timer);
    return () => this.timers.delete(timer);
  }

  /** Timers still waiting. */
  get pending(): number {
    return this.timers.size;
  }

  /** Moves time on by `ms`, running every timer that falls due on the way, earliest first. */
  advance(ms: number): void {
    const end = this.time + ms;
    for (;;) {
      let next: { at: number; fn: () => void } | undefined;
      for (const t of this.timers) if (t.at <= end && (!next || t.at < next.at)) next = t;
      if (!next) break;
      this.timers.delete(next);
      this.time = Math.max(this.time, next.at);
      next.fn();
    }
    this.time = end;
  }
}

/**
 * Where a retention of `retentionMs` cuts off on `clock`: what was stored (or
 * last active) before this has expired. `null` for no retention: nothing expires.
 */
export function retentionCutoff(clock: Clock, retentionMs: number): Date;
export function retentionCutoff(clock: Clock, retentionMs: number | undefined): Date | null;
export function retentionCutoff(clock: Clock, retentionMs: number | undefined): Date | null {
  return retentionMs === undefined ? null : new Date(clock.wall() - retentionMs);
}
