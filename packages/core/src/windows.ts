import { randomUUID } from "node:crypto";
import { hostname } from "node:os";
import { type Clock, systemClock } from "./clock.ts";
import { type Limits, limitEntries, UNIT_WINDOW_SECONDS, type Unit, type UnitLimits } from "./limits.ts";
import type { RedisClient } from "./redis.ts";

/** Spend is counted in billionths of a US dollar, so prices and sums stay whole numbers. */
export const NANO_USD_PER_USD = 1_000_000_000;

/** Whose window: the API key's, or one end user's of that key. */
export type Scope = "key" | "endUser";

/** One window of one unit of one subject, with what a reservation counts in it. */
export interface Counter {
  scope: Scope;
  unit: Unit;
  window: string;
  /** The quota, in counted units (requests, tokens, nano-USD). */
  quota: number;
  /** Window length in ms. */
  ms: number;
  /** What is (or was) counted in it. */
  amount: number;
  key: string;
}

/** A window's standing: `limit`, `used` and `remaining` in the unit's own terms (spend in dollars). */
export interface WindowState {
  scope: Scope;
  unit: Unit;
  window: string;
  limit: number;
  /** Window length in seconds. */
  seconds: number;
  used: number;
  remaining: number;
  /** Milliseconds until the current window ends. */
  resetMs: number;
}

/** What a reservation counted, to settle it later (once: its record is deleted by the first settlement). */
export interface Reservation {
  /** The counters with what was counted in each. */
  counters: Counter[];
  /** Absolute expiry (ms, Redis's clock) of each counter's window when it was counted in. */
  expiresAt: number[];
  /** The reservation's record in Redis (`<tag>:lease:<id>`); it exists until the reservation is settled. */
  record: string;
}

/** What one reservation asks of each unit; units left out are not counted. */
export type Amounts = Partial<Record<Unit, number>>;

export type ReserveResult =
  | { admitted: true; states: WindowState[]; reservation: Reservation; times: number }
  | { admitted: false; refusedBy: WindowState; states: WindowState[] };

/** The Redis store could not be asked. */
export class WindowStoreError extends Error {
  constructor(cause: unknown) {
    super(`rate-limit store failed: ${(cause as Error)?.message ?? String(cause)}`, { cause });
    this.name = "WindowStoreError";
  }
}

/**
 * Counts in every given window at once, or nowhere. KEYS: the counters (all
 * with the key's hash tag: one slot), then the reservation's record.
 * ARGV[1]: times wanted (0 only reads; above 1, a lease of that many times
 * the amounts, granted only while every window stays at most half full with
 * it, else once); ARGV[2]: the record's payload ('' for none); ARGV[3i], ARGV[3i+1],
 * ARGV[3i+2]: amount, quota and length in ms of counter i. Nothing is
 * written unless every counter has room: a refused reservation counts
 * nowhere, not even for a moment. A window starts with the first amount
 * counted in it (fixed windows). Admitted with a payload (and, when a lease
 * of points was asked for, granted it), the record keeps the payload and the
 * windows' absolute expiries until the longest of them ends. Returns
 * `{refused index or 0, times granted, count_1, ttl_1, expires_at_1, …}`.
 */
const RESERVE = `
local want, n = tonumber(ARGV[1]), #KEYS - 1
local counts, ttls, fresh = {}, {}, {}
local refused, lease = 0, want > 1
for i = 1, n do
  local amount, quota = tonumber(ARGV[3 * i]), tonumber(ARGV[3 * i + 1])
  local ttl = redis.call('pttl', KEYS[i])
  local count = 0
  if ttl > 0 then
    count = tonumber(redis.call('get', KEYS[i]) or '0')
  else
    ttl = tonumber(ARGV[3 * i + 2])
    fresh[i] = true
  end
  counts[i], ttls[i] = count, ttl
  if amount > 0 then
    if count + want * amount > math.floor(quota / 2) then lease = false end
    if count + amount > quota and refused == 0 then refused = i end
  end
end
local times = 0
if want == 0 then refused = 0 elseif refused == 0 then times = lease and want or 1 end
local out, expires, longest = {refused, times}, {}, 0
for i = 1, n do
  local amount = tonumber(ARGV[3 * i]) * times
  expires[i] = 0
  if amount > 0 then
    if fresh[i] then
      redis.call('set', KEYS[i], amount, 'PX', ttls[i])
    else
      redis.call('incrby', KEYS[i], amount)
    end
    counts[i] = counts[i] + amount
    expires[i] = redis.call('pexpiretime', KEYS[i])
    if ttls[i] > longest then longest = ttls[i] end
  end
  out[3 * i] = counts[i]
  out[3 * i + 1] = ttls[i]
  out[3 * i + 2] = expires[i]
end
if longest > 0 and ARGV[2] ~= '' and (want == 1 or times > 1) then
  redis.call('hset', KEYS[n + 1], 'lease', ARGV[2], 'expires', table.concat(expires, ','))
  redis.call('pexpire', KEYS[n + 1], longest)
end
return out
`;

/**
 * Settles a reservation once: deletes its record (none left: already
 * settled, return 0) and adds delta_i (negative: gives back) to each counter
 * whose window is still the one it was counted in (same absolute expiry); a
 * window that has ended since is left alone, so nothing is refunded into (or
 * charged to) its successor. KEYS: the counters, then the record;
 * ARGV[2i-1], ARGV[2i]: delta and expiry of counter i.
 */
const SETTLE = `
if redis.call('del', KEYS[#KEYS]) == 0 then return 0 end
for i = 1, #KEYS - 1 do
  local delta = tonumber(ARGV[2 * i - 1])
  if delta ~= 0 and redis.call('pexpiretime', KEYS[i]) == tonumber(ARGV[2 * i]) then
    redis.call('incrby', KEYS[i], delta)
  end
end
return 1
`;

type Scripted = RedisClient & {
  reserveWindows(numKeys: number, ...keysAndArgs: (string | number)[]): Promise<number[]>;
  settleWindows(numKeys: number, ...keysAndArgs: (string | number)[]): Promise<number>;
};

/** A lease's record payload: whose it is, its counters, and what each is charged if the holder never settles. */
interface LeasePayload {
  holder: string;
  keys: string[];
  reserved: number[];
  onExpiry: number[];
}

export interface LeaseOptions {
  /** This process, as leases name their holder. */
  holder: string;
  /** How long a lease stands without its holder renewing it, in ms. */
  ttlMs: number;
  /** Abandoned leases settled per sweep, at most. */
  sweepBatch: number;
}

/** A lease stands a minute unless renewed; a holder renews its leases every `LEASE_KEEPING_MS` (`keepLeases`). */
export const DEFAULT_LEASE_OPTIONS: LeaseOptions = {
  holder: `${hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`,
  ttlMs: 60_000,
  sweepBatch: 100,
};

/** How often a process renews its leases and sweeps abandoned ones: a third of a lease's time. */
export const LEASE_KEEPING_MS = 20_000;

/**
 * Every counting window of the gateway and the service, in Redis, exact
 * across all their replicas: the key scheme and the two scripts (reserve,
 * settle) that count requests, tokens and spend.
 *
 * Counters are `<prefix>:{<keyId>}:<window>` (the key's request windows),
 * `<prefix>:{<keyId>}:<unit>:<window>` and, for end user U,
 * `<prefix>:{<keyId>}:eu:<U, URI-encoded>:<unit>:<window>`; a reservation's
 * record is `<prefix>:{<keyId>}:lease:<id>`: one slot per key, so the scripts
 * run on Redis Cluster too (Redis 7.0 or later: PEXPIRETIME).
 *
 * A reservation made with `lease` is also indexed in `<prefix>:leases`
 * (scored by its expiry) before it is counted: its holder renews it while
 * the work runs (`keepLeases`), and `sweep` settles one whose holder died
 * (the expiry passed unrenewed) with the charge named at reservation.
 */
export class CountingWindows {
  private readonly redis: Scripted;
  private readonly prefix: string;
  private readonly windowMs: (unit: Unit, window: string) => number;
  private readonly lease: LeaseOptions;
  private readonly clock: Clock;
  /** Leases of this holder not settled yet: renewed until they are. */
  private readonly held = new Set<string>();

  constructor(
    redis: RedisClient,
    options: {
      prefix?: string;
      /** Shortens windows in tests. */
      windowMs?: (unit: Unit, window: string) => number;
      lease?: Partial<LeaseOptions>;
      /** The process's clock: its wall time dates lease expiries (compared across processes), its timers keep them; the system clock by default. */
      clock?: Clock;
    } = {},
  ) {
    if (!("reserveWindows" in redis)) {
      redis.defineCommand("reserveWindows", { lua: RESERVE });
      redis.defineCommand("settleWindows", { lua: SETTLE });
    }
    this.redis = redis as Scripted;
    this.prefix = options.prefix ?? "gw:rl";
    this.windowMs = options.windowMs ?? ((unit, window) => UNIT_WINDOW_SECONDS[unit][window]! * 1000);
    this.lease = { ...DEFAULT_LEASE_OPTIONS, ...options.lease };
    this.clock = options.clock ?? systemClock;
  }

  /**
   * Every limited window of the key and, with `user`, of that end user, in
   * the units `amounts` names, with what it counts in each.
   */
  counters(keyId: string, user: string | undefined, limits: Limits, amounts: Amounts): Counter[] {
    const tag = this.tag(keyId);
    const of = (scope: Scope, unitLimits: UnitLimits | undefined, base: string) =>
      limitEntries(unitLimits)
        .filter((e) => amounts[e.unit] !== undefined)
        .map(
          (e): Counter => ({
            scope,
            unit: e.unit,
            window: e.window,
            quota: e.unit === "spend" ? Math.round(e.limit * NANO_USD_PER_USD) : e.limit,
            ms: this.windowMs(e.unit, e.window),
            amount: amounts[e.unit]!,
            key:
              scope === "key" && e.unit === "requests"
                ? `${base}:${e.window}`
                : `${base}:${e.unit}:${e.window}`,
          }),
        );
    return [
      ...of("key", limits, tag),
      ...(user === undefined ? [] : of("endUser", limits.endUser, `${tag}:eu:${encodeURIComponent(user)}`)),
    ];
  }

  /**
   * Counts `counters` all at once, or nowhere when any has no room. `times`
   * above 1 asks for a lease of that many times the amounts (granted only
   * while every window stays at most half full with it, else once). With
   * `lease`, the reservation is a lease held by this process: until it is
   * settled, a sweep after its holder's death charges `lease.onExpiry`
   * (per unit) instead of what was reserved. `final` counts for good: no
   * record is kept, and the reservation cannot be settled (the gateway's
   * requests, one at a time).
   */
  async reserve(
    keyId: string,
    counters: Counter[],
    options: { times?: number; lease?: { onExpiry: Amounts }; final?: boolean } = {},
  ): Promise<ReserveResult> {
    const record = `${this.tag(keyId)}:lease:${randomUUID()}`;
    let payload = options.final ? "" : "{}";
    if (options.lease) {
      const onExpiry = options.lease.onExpiry;
      payload = JSON.stringify({
        holder: this.lease.holder,
        keys: counters.map((c) => c.key),
        reserved: counters.map((c) => c.amount),
        onExpiry: counters.map((c) => onExpiry[c.unit] ?? 0),
      } satisfies LeasePayload);
      // Indexed before it is counted: a holder that dies in between leaves an entry that finds no record.
      await this.store(() => this.redis.zadd(this.leaseIndex, this.clock.wall() + this.lease.ttlMs, record));
    }
    const args: (string | number)[] = [...counters.map((c) => c.key), record, options.times ?? 1, payload];
    for (const c of counters) args.push(c.amount, c.quota, c.ms);
    const reply = await this.store(() => this.redis.reserveWindows(counters.length + 1, ...args));
    const states = counters.map((c, i) => stateOf(c, reply[3 * i + 2]!, reply[3 * i + 3]!));
    const [refused, times] = [reply[0]!, reply[1]!];
    if (refused > 0 || times === 0) {
      if (options.lease) void this.redis.zrem(this.leaseIndex, record).catch(() => undefined);
      return { admitted: false, refusedBy: states[refused - 1]!, states };
    }
    if (options.lease) this.held.add(record);
    return {
      admitted: true,
      states,
      times,
      reservation: {
        counters: counters.map((c) => ({ ...c, amount: c.amount * times })),
        expiresAt: counters.map((_, i) => reply[3 * i + 4]!),
        record,
      },
    };
  }

  /**
   * Replaces what `reservation` counted by `used` (per unit), in the windows
   * that still run. Once: returns whether this run applied it (false when it
   * was settled before, by its holder or by a sweep).
   */
  async settle(reservation: Reservation, used: Amounts): Promise<boolean> {
    const deltas = reservation.counters.map((c) => (used[c.unit] ?? 0) - c.amount);
    const keys = reservation.counters.map((c) => c.key);
    // No longer renewed, even if this fails: a lease its holder cannot settle is left to the sweep.
    const held = this.held.delete(reservation.record);
    const applied = await this.apply(reservation.record, keys, deltas, reservation.expiresAt);
    if (held) void this.redis.zrem(this.leaseIndex, reservation.record).catch(() => undefined);
    return applied;
  }

  /** Current standing of the key's windows and, with `user`, that end user's, counting nothing. */
  async peek(keyId: string, user: string | undefined, limits: Limits): Promise<WindowState[]> {
    const counters = this.counters(keyId, user, limits, { requests: 0, tokens: 0, spend: 0 });
    if (counters.length === 0) return [];
    return (await this.reserve(keyId, counters, { times: 0 })).states;
  }

  /** Moves the expiry of this holder's unsettled leases on by the lease time: they are still being worked on. */
  async renewLeases(): Promise<void> {
    if (this.held.size === 0) return;
    const expiry = this.clock.wall() + this.lease.ttlMs;
    await this.store(() =>
      this.redis.zadd(this.leaseIndex, "XX", ...[...this.held].flatMap((r) => [expiry, r])),
    );
  }

  /**
   * Settles leases whose expiry has passed unrenewed (their holder died), at
   * most `sweepBatch` per run, each with the charge named when it was made;
   * entries whose record is gone (settled, refused, or never counted) are
   * dropped. Safe beside other sweepers and late holders: a lease settles
   * once. Returns the holders of the leases it settled.
   */
  async sweep(): Promise<string[]> {
    const due = await this.store(() =>
      this.redis.zrangebyscore(this.leaseIndex, "-inf", this.clock.wall(), "LIMIT", 0, this.lease.sweepBatch),
    );
    const holders: string[] = [];
    for (const record of due) {
      const [payload, expires] = await this.store(() => this.redis.hmget(record, "lease", "expires"));
      if (payload && expires) {
        const { holder, keys, reserved, onExpiry } = JSON.parse(payload) as LeasePayload;
        const deltas = onExpiry.map((charge, i) => charge - reserved[i]!);
        if (await this.apply(record, keys, deltas, expires.split(",").map(Number))) holders.push(holder);
      }
      await this.store(() => this.redis.zrem(this.leaseIndex, record));
    }
    return holders;
  }

  /**
   * Renews this holder's leases and sweeps abandoned ones every `everyMs`
   * (`LEASE_KEEPING_MS`: a third of a lease's time) until the returned
   * function is called. `on.swept` hears the holders of leases a sweep
   * settled, `on.error` a run that failed (Redis away; the next run tries again).
   */
  keepLeases(everyMs: number, on: { swept(holders: string[]): void; error(err: unknown): void }): () => void {
    let stopped = false;
    let cancel = () => {};
    const run = () => {
      Promise.all([this.renewLeases(), this.sweep()])
        .then(([, holders]) => holders.length > 0 && on.swept(holders), on.error)
        .finally(() => {
          if (!stopped) cancel = this.clock.schedule(everyMs, run);
        });
    };
    cancel = this.clock.schedule(everyMs, run);
    return () => {
      stopped = true;
      cancel();
    };
  }

  private get leaseIndex(): string {
    return `${this.prefix}:leases`;
  }

  private tag(keyId: string): string {
    return `${this.prefix}:{${keyId}}`;
  }

  private apply(record: string, keys: string[], deltas: number[], expiresAt: number[]): Promise<boolean> {
    const args: (string | number)[] = [...keys, record];
    for (const [i, delta] of deltas.entries()) args.push(delta, expiresAt[i]!);
    return this.store(async () => (await this.redis.settleWindows(keys.length + 1, ...args)) === 1);
  }

  private async store<T>(run: () => Promise<T>): Promise<T> {
    try {
      return await run();
    } catch (err) {
      throw new WindowStoreError(err);
    }
  }
}

function stateOf(c: Counter, count: number, ttl: number): WindowState {
  const scale = c.unit === "spend" ? NANO_USD_PER_USD : 1;
  return {
    scope: c.scope,
    unit: c.unit,
    window: c.window,
    limit: c.quota / scale,
    seconds: c.ms / 1000,
    used: count / scale,
    remaining: Math.max(0, c.quota - count) / scale,
    resetMs: Math.max(0, ttl),
  };
}
