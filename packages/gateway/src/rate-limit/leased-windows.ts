import { randomUUID } from "node:crypto";
import { type Clock, systemClock } from "@gw/core/clock";
import { type Limits, WINDOWS } from "@gw/core/limits";
import type { Decision, QuotaLimiter, WindowState } from "./quota.ts";
import { type RedisWindows, type Taken, toDecision } from "./redis-windows.ts";

export interface LeaseOptions {
  /** A lease is this share of the key's smallest quota (0.01: 1 %); below 2 points, no lease. */
  share: number;
  /** Largest lease, in points. */
  maxPoints: number;
  /** How long a lease may be used before what is left goes back to Redis, in ms. */
  maxMs: number;
}

/** Pauses before the give-back of a lease is tried again. */
const GIVE_BACK_RETRIES_MS = [200, 1_000, 5_000];

export const DEFAULT_LEASES: LeaseOptions = { share: 0.01, maxPoints: 64, maxMs: 100 };

interface Lease extends Pick<Taken, "keys" | "tag" | "expiresAt" | "states"> {
  /** Names the lease's give-back, so retrying it is safe. */
  id: string;
  /** Points counted in Redis and not used yet. */
  left: number;
  takenAt: number;
  /** The clock's time after which the lease is not used. */
  until: number;
  cancelTimer: () => void;
}

/**
 * Heavy keys touch Redis once per lease instead of once per request. While
 * every window of a key would stay at most half full, a decision takes a
 * lease of points (a share of the smallest quota) and later requests of that
 * key on this replica use it without asking Redis; near a limit, every
 * request is decided in Redis. Exactness holds: a lease is counted in Redis
 * before it is used, and is used only until the earliest of its windows
 * ends (timed from before Redis counted it) and at most `maxMs`; what is
 * left then goes back to the windows that counted it, if they still run.
 * Unused points of a lease are counted for at most `maxMs`, and only while a
 * window is at most half full, so they cannot refuse anyone unless the
 * window fills from half to full within that time.
 */
export class LeasedWindows implements QuotaLimiter {
  private readonly redis: RedisWindows;
  private readonly options: LeaseOptions;
  private readonly leases = new Map<string, Lease>();
  /** Lease requests under way, so concurrent requests of a key wait for one instead of each asking Redis. */
  private readonly taking = new Map<string, Promise<unknown>>();
  /** Errors giving points back (Redis away): the points stay counted until their window ends. */
  onGiveBackError: (err: unknown) => void = () => {};

  private readonly clock: Clock;

  constructor(redis: RedisWindows, options: LeaseOptions = DEFAULT_LEASES, clock: Clock = systemClock) {
    this.redis = redis;
    this.options = options;
    this.clock = clock;
  }

  /** The lease size for these limits; below 2, leases are not worth it. */
  leasePoints(limits: Limits): number {
    let smallest = Number.POSITIVE_INFINITY;
    for (const w of WINDOWS) if (limits[w] !== undefined) smallest = Math.min(smallest, limits[w]!);
    return Math.min(this.options.maxPoints, Math.floor(smallest * this.options.share));
  }

  async decide(keyId: string, limits: Limits): Promise<Decision> {
    const want = this.leasePoints(limits);
    if (want < 2) return this.redis.decide(keyId, limits);
    const id = entryKey(keyId, limits);
    const fromLease = this.use(id);
    if (fromLease) return fromLease;
    const pending = this.taking.get(id);
    if (pending) {
      await pending.catch(() => undefined);
      const afterWait = this.use(id);
      if (afterWait) return afterWait;
      return this.redis.decide(keyId, limits);
    }
    const asked = this.clock.now();
    const taking = this.redis.take(keyId, limits, want);
    this.taking.set(id, taking);
    try {
      const taken = await taking;
      if (taken.granted < 2) return toDecision(taken);
      this.keep(id, taken, asked);
      return {
        ...toDecision({ ...taken, states: withLeft(taken.states, taken.granted - 1, 0) }),
        source: "lease",
      };
    } finally {
      this.taking.delete(id);
    }
  }

  peek(keyId: string, limits: Limits): Promise<WindowState[]> {
    return this.redis.peek(keyId, limits);
  }

  /** Gives every lease's unused points back now (on shutdown). */
  async close(): Promise<void> {
    await Promise.all([...this.leases.keys()].map((id) => this.end(id)));
  }

  /** One point of a live lease, as a decision, or undefined. */
  private use(id: string): Decision | undefined {
    const lease = this.leases.get(id);
    if (!lease) return undefined;
    const now = this.clock.now();
    if (lease.left === 0 || now >= lease.until) {
      void this.end(id);
      return undefined;
    }
    lease.left--;
    const windows = withLeft(lease.states, lease.left, now - lease.takenAt);
    if (lease.left === 0) void this.end(id);
    return { allowed: true, windows, source: "lease" };
  }

  private keep(id: string, taken: Taken, asked: number): void {
    void this.end(id);
    const until = asked + Math.min(this.options.maxMs, ...taken.states.map((s) => s.resetMs));
    const lease: Lease = {
      id: randomUUID(),
      keys: taken.keys,
      tag: taken.tag,
      expiresAt: taken.expiresAt,
      states: taken.states,
      left: taken.granted - 1, // one point is this request's
      takenAt: asked,
      until,
      cancelTimer: this.clock.schedule(until - this.clock.now(), () => void this.end(id)),
    };
    this.leases.set(id, lease);
  }

  /** Ends a lease, giving its unused points back. */
  private async end(id: string): Promise<void> {
    const lease = this.leases.get(id);
    if (!lease) return;
    this.leases.delete(id);
    lease.cancelTimer();
    if (lease.left === 0) return;
    // Retried on failure (a timeout under load may hide a give-back that landed: the id makes
    // a second run a no-op); if Redis stays away, the points stay counted until their window ends.
    for (let attempt = 0; ; attempt++) {
      try {
        return await this.redis.giveBack(lease, lease.left, lease.id);
      } catch (err) {
        if (attempt === GIVE_BACK_RETRIES_MS.length) return this.onGiveBackError(err);
        await new Promise((r) => this.clock.schedule(GIVE_BACK_RETRIES_MS[attempt]!, () => r(undefined)));
      }
    }
  }
}

/** Window states as this replica sees them: Redis's count less the lease points still unused here. */
function withLeft(states: WindowState[], left: number, elapsedMs: number): WindowState[] {
  return states.map((s) => ({
    ...s,
    remaining: Math.min(s.limit, s.remaining + left),
    resetMs: Math.max(0, s.resetMs - elapsedMs),
  }));
}

export function entryKey(keyId: string, limits: Limits): string {
  let key = keyId;
  for (const w of WINDOWS) key += `|${limits[w] ?? ""}`;
  return key;
}
