/**
 * A time source for limiter, lease, cache and lock logic, in milliseconds
 * from an arbitrary start, never going back. Logic reads it instead of the
 * wall clock, so tests move time instead of sleeping (as envoy ratelimit's
 * `TimeSource` and unkey's test clock).
 */
export interface Clock {
  now(): number;
  /** Runs `fn` once `ms` have passed on this clock; the function returned cancels it. Never keeps the process alive. */
  schedule(ms: number, fn: () => void): () => void;
}

/** Real time: `performance.now()` and unreferenced timers. */
export const systemClock: Clock = {
  now: () => performance.now(),
  schedule(ms, fn) {
    const timer = setTimeout(fn, ms).unref();
    return () => clearTimeout(timer);
  },
};

/** A clock that stands still until `advance` moves it, running what falls due (for tests). */
export class ManualClock implements Clock {
  private time: number;
  private readonly timers = new Set<{ at: number; fn: () => void }>();

  constructor(start = 1_000_000) {
    this.time = start;
  }

  now(): number {
    return this.time;
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
