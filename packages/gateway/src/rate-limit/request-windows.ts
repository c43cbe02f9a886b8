import { type Clock, systemClock } from "@gw/core/clock";
import { AppError } from "@gw/core/errors";
import { type Limits, WINDOWS } from "@gw/core/limits";
import type { Logger } from "@gw/core/logger";
import {
  type CountingWindows,
  type ReserveResult,
  type WindowState,
  WindowStoreError,
} from "@gw/core/windows";
import type { GatewayMetrics } from "../metrics.ts";
import { MemoryWindows } from "./memory-windows.ts";

export type FailMode = "open" | "closed";

/** Rate limiting could not be decided and the fail mode is `closed`. */
export class RateLimitUnavailable extends AppError {
  constructor(cause: unknown) {
    super("service_unavailable", "Rate limiting is unavailable; try again", { cause });
    this.name = "RateLimitUnavailable";
  }
}

/** Where a decision was made: Redis, a lease taken from it, a refusal remembered here, or the insurance. */
export type DecisionStore = "redis" | "lease" | "local" | "memory";

export type Decision =
  | { allowed: true; windows: WindowState[]; store: DecisionStore }
  | { allowed: false; refusedBy: WindowState; windows: WindowState[]; store: DecisionStore };

export interface LeaseOptions {
  /** A lease is this share of the key's smallest quota (0.01: 1 %); below 2 points, no lease. */
  share: number;
  /** Largest lease, in points. */
  maxPoints: number;
  /** How long a lease may be used before what is left goes back to Redis, in ms. */
  maxMs: number;
}

export const DEFAULT_LEASES: LeaseOptions = { share: 0.01, maxPoints: 64, maxMs: 100 };

/** After a store failure, how long decisions skip the store before trying it again. */
const STORE_RETRY_MS = 1_000;
/** Pauses before the give-back of a lease is tried again. */
const GIVE_BACK_RETRIES_MS = [200, 1_000, 5_000];
const MAX_REFUSALS = 10_000;

interface Lease {
  taken: Extract<ReserveResult, { admitted: true }>;
  /** Points counted in Redis and not used yet. */
  left: number;
  takenAt: number;
  /** The clock's time after which the lease is not used. */
  until: number;
  cancelTimer: () => void;
}

interface Refusal {
  decision: Extract<Decision, { allowed: false }>;
  /** The clock's time when the decision was asked for, and until when it stands. */
  askedAt: number;
  until: number;
}

/**
 * The key's request windows, decided for step 3. Redis counts them
 * (`CountingWindows`, the one counting module both processes share); three
 * things in front of it spare it work without giving up exactness
 * (docs/api/rate-limits.md):
 *
 * - A refused key is answered here until the refusing window resets: a fixed
 *   window only fills, and a refused request counts nowhere, so the answer
 *   cannot change before then (timed from before Redis decided). Where a
 *   lease may give points back, a refusal is trusted for `maxMs` at a time.
 * - A heavy key takes a lease of points while every window would stay at
 *   most half full, and this replica admits that many without asking Redis,
 *   until the earliest window ends and at most `maxMs`; what is left then
 *   goes back to the windows that counted it (once, by the reservation's
 *   record). A point is counted before it is used.
 * - When Redis fails or is too slow, `open` decides in memory on this replica
 *   (the same quotas and counting), `closed` answers 503; Redis is left
 *   alone for a second, then tried again.
 */
export class RequestWindows {
  private readonly windows: CountingWindows;
  private readonly insurance = new MemoryWindows();
  private readonly mode: FailMode;
  private readonly leases: LeaseOptions;
  private readonly metrics: GatewayMetrics | undefined;
  private readonly logger: Logger | undefined;
  private readonly clock: Clock;
  private readonly held = new Map<string, Lease>();
  /** Lease requests under way, so concurrent requests of a key wait for one instead of each asking Redis. */
  private readonly taking = new Map<string, Promise<unknown>>();
  private readonly refusals = new Map<string, Refusal>();
  /** The clock's time until which decisions skip the store; 0 while it works. */
  private storeDownUntil = 0;
  private readonly onGiveBackError: (err: unknown) => void;
  /** Set by `close`: a give-back that fails is not tried again, its connection is going away. */
  private closed = false;
  /** Lease ends started without a caller waiting (a lapse, a spent lease), for `close` to wait on. */
  private readonly ending = new Set<Promise<void>>();
  /** Pauses between give-back attempts, which `close` cuts short. */
  private readonly pauses = new Set<() => void>();

  constructor(
    windows: CountingWindows,
    options: {
      mode?: FailMode;
      leases?: LeaseOptions;
      metrics?: GatewayMetrics;
      logger?: Logger;
      clock?: Clock;
      /** Errors giving points back (Redis away): the points stay counted until their window ends. */
      onGiveBackError?: (err: unknown) => void;
    } = {},
  ) {
    this.windows = windows;
    this.mode = options.mode ?? "open";
    this.leases = options.leases ?? DEFAULT_LEASES;
    this.metrics = options.metrics;
    this.logger = options.logger;
    this.clock = options.clock ?? systemClock;
    this.onGiveBackError = options.onGiveBackError ?? (() => {});
  }

  /** Counts one request of the key in every request window, or, when any refuses it, in none. */
  async decide(keyId: string, limits: Limits): Promise<Decision> {
    const stop = this.metrics?.rateLimitDecisionSeconds.startTimer();
    try {
      const decision = await this.decideSomewhere(keyId, requestLimits(limits));
      if (decision.allowed) {
        for (const w of decision.windows)
          this.metrics?.rateLimitDecisions.inc({
            outcome: "allowed",
            window: w.window,
            store: decision.store,
          });
      } else {
        const window = decision.refusedBy.window;
        this.metrics?.rateLimitDecisions.inc({ outcome: "rejected", window, store: decision.store });
      }
      return decision;
    } finally {
      stop?.();
    }
  }

  /** Current standing in Redis without counting a request (for operators and tests). */
  peek(keyId: string, limits: Limits): Promise<WindowState[]> {
    return this.windows.peek(keyId, undefined, requestLimits(limits));
  }

  /** The lease size for these limits; below 2, leases are not worth it. */
  leasePoints(limits: Limits): number {
    let smallest = Number.POSITIVE_INFINITY;
    for (const w of WINDOWS) if (limits[w] !== undefined) smallest = Math.min(smallest, limits[w]!);
    return Math.min(this.leases.maxPoints, Math.floor(smallest * this.leases.share));
  }

  /**
   * Gives every lease's unused points back now (on shutdown), and waits for
   * give-backs under way: one waiting to be retried is tried once more now and
   * not again. After this, no Redis command of this limiter is in flight or
   * due, so its connection can be closed.
   */
  async close(): Promise<void> {
    this.closed = true;
    for (const cut of [...this.pauses]) cut();
    await Promise.all([...[...this.held.keys()].map((id) => this.end(id)), ...this.ending]);
  }

  private async decideSomewhere(keyId: string, limits: Limits): Promise<Decision> {
    const entry = entryKey(keyId, limits);
    const now = this.clock.now();
    const refusal = this.refusals.get(entry);
    if (refusal && refusal.until > now) return elapsed(refusal.decision, now - refusal.askedAt);
    this.refusals.delete(entry);
    if (now >= this.storeDownUntil) {
      try {
        const decision = await this.inRedis(keyId, limits, entry);
        if (this.storeDownUntil !== 0) {
          this.storeDownUntil = 0;
          this.logger?.info("rate-limit store is back");
        }
        if (!decision.allowed) this.remember(entry, decision, now, limits);
        return decision;
      } catch (err) {
        if (!(err instanceof WindowStoreError)) throw err;
        this.metrics?.rateLimitStoreErrors.inc();
        if (this.storeDownUntil === 0)
          this.logger?.warn({ err: err.message, mode: this.mode }, "rate-limit store failed");
        this.storeDownUntil = this.clock.now() + STORE_RETRY_MS;
      }
    }
    this.metrics?.rateLimitFallbacks.inc({ mode: this.mode });
    if (this.mode === "closed") throw new RateLimitUnavailable(new Error("store unavailable"));
    return { ...(await this.insurance.decide(keyId, limits)), store: "memory" };
  }

  /** One point from a live lease, else from Redis: a lease when the key is heavy, one point otherwise. */
  private async inRedis(keyId: string, limits: Limits, entry: string): Promise<Decision> {
    const want = this.leasePoints(limits);
    const counters = this.windows.counters(keyId, undefined, limits, { requests: 1 });
    const once = async () => toDecision(await this.windows.reserve(keyId, counters, { final: true }));
    if (want < 2) return once();
    const fromLease = this.use(entry);
    if (fromLease) return fromLease;
    const pending = this.taking.get(entry);
    if (pending) {
      await pending.catch(() => undefined);
      return this.use(entry) ?? once();
    }
    const asked = this.clock.now();
    const taking = this.windows.reserve(keyId, counters, { times: want });
    this.taking.set(entry, taking);
    try {
      const taken = await taking;
      if (!taken.admitted || taken.times < 2) return toDecision(taken);
      this.endLater(entry);
      const until = asked + Math.min(this.leases.maxMs, ...taken.states.map((s) => s.resetMs));
      this.held.set(entry, {
        taken,
        left: taken.times - 1, // one point is this request's
        takenAt: asked,
        until,
        cancelTimer: this.clock.schedule(until - this.clock.now(), () => this.endLater(entry)),
      });
      return { allowed: true, windows: withLeft(taken.states, taken.times - 1, 0), store: "lease" };
    } finally {
      this.taking.delete(entry);
    }
  }

  /** One point of a live lease, as a decision, or undefined. */
  private use(entry: string): Decision | undefined {
    const lease = this.held.get(entry);
    if (!lease) return undefined;
    const now = this.clock.now();
    if (lease.left === 0 || now >= lease.until) {
      this.endLater(entry);
      return undefined;
    }
    lease.left--;
    const windows = withLeft(lease.taken.states, lease.left, now - lease.takenAt);
    if (lease.left === 0) this.endLater(entry);
    return { allowed: true, windows, store: "lease" };
  }

  /** `end` with no caller waiting: `close` waits for it instead. */
  private endLater(entry: string): void {
    const ending = this.end(entry).catch((err: unknown) => this.onGiveBackError(err));
    this.ending.add(ending);
    const settled = () => this.ending.delete(ending);
    ending.then(settled, settled);
  }

  /** Resolves after `ms` on the clock, or at once when `close` cuts it short. */
  private pause(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        this.pauses.delete(done);
        cancel();
        resolve();
      };
      const cancel = this.clock.schedule(ms, done);
      this.pauses.add(done);
    });
  }

  /** Ends a lease, giving its unused points back (retried; the reservation's record makes a repeat a no-op). */
  private async end(entry: string): Promise<void> {
    const lease = this.held.get(entry);
    if (!lease) return;
    this.held.delete(entry);
    lease.cancelTimer();
    if (lease.left === 0) return;
    const used = { requests: lease.taken.times - lease.left };
    for (let attempt = 0; ; attempt++) {
      try {
        return void (await this.windows.settle(lease.taken.reservation, used));
      } catch (err) {
        if (attempt === GIVE_BACK_RETRIES_MS.length || this.closed) return this.onGiveBackError(err);
        await this.pause(GIVE_BACK_RETRIES_MS[attempt]!);
      }
    }
  }

  private remember(
    entry: string,
    decision: Extract<Decision, { allowed: false }>,
    askedAt: number,
    limits: Limits,
  ) {
    if (this.refusals.size >= MAX_REFUSALS) this.refusals.delete(this.refusals.keys().next().value!);
    const trustMs = this.leasePoints(limits) >= 2 ? this.leases.maxMs : Number.POSITIVE_INFINITY;
    this.refusals.set(entry, {
      decision,
      askedAt,
      until: askedAt + Math.min(decision.refusedBy.resetMs, trustMs),
    });
  }
}

/** Only the request windows of a key's limits. */
function requestLimits(limits: Limits): Limits {
  const out: Limits = {};
  for (const w of WINDOWS) if (limits[w] !== undefined) out[w] = limits[w];
  return out;
}

function toDecision(result: ReserveResult): Decision {
  if (result.admitted) return { allowed: true, windows: result.states, store: "redis" };
  return { allowed: false, refusedBy: result.refusedBy, windows: result.states, store: "redis" };
}

/** Window states as this replica sees them: Redis's count less the lease points still unused here. */
function withLeft(states: WindowState[], left: number, elapsedMs: number): WindowState[] {
  return states.map((s) => ({
    ...s,
    used: Math.max(0, s.used - left),
    remaining: Math.min(s.limit, s.remaining + left),
    resetMs: Math.max(0, s.resetMs - elapsedMs),
  }));
}

/** The same refusal, `ms` later: every window is that much closer to its reset. */
function elapsed(decision: Extract<Decision, { allowed: false }>, ms: number): Decision {
  const later = (s: WindowState): WindowState => ({ ...s, resetMs: Math.max(0, s.resetMs - ms) });
  return {
    allowed: false,
    refusedBy: later(decision.refusedBy),
    windows: decision.windows.map(later),
    store: "local",
  };
}

/** A key with these quotas: changed limits are a different entry. */
function entryKey(keyId: string, limits: Limits): string {
  let key = keyId;
  for (const w of WINDOWS) key += `|${limits[w] ?? ""}`;
  return key;
}
