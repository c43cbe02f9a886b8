import { type Limits, limitEntries, UNIT_WINDOW_SECONDS, type Unit, type UnitLimits } from "./limits.ts";
import type { RedisClient } from "./redis.ts";

/** Spend is counted in billionths of a US dollar, so prices and sums stay whole numbers. */
export const NANO_USD_PER_USD = 1_000_000_000;

/** Whose window: the API key's, or one end user's of that key. */
export type Scope = "key" | "endUser";

/** One window of one unit of one subject, as a reservation counts in it. */
export interface BudgetCounter {
  scope: Scope;
  unit: Unit;
  window: string;
  /** The quota, in counted units (requests, tokens, nano-USD). */
  quota: number;
  /** Window length in ms. */
  ms: number;
  /** What this reservation counts in it. */
  amount: number;
  key: string;
}

/** A window's standing: `limit`, `used` and `remaining` in the unit's own terms (spend in dollars). */
export interface BudgetState {
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

/** What a reservation counted, to settle it later. */
export interface Reservation {
  counters: BudgetCounter[];
  /** Absolute expiry (ms) of each counter's window when it was counted in. */
  expiresAt: number[];
  /** `<prefix>:{<keyId>}`: the hash tag every counter of the key shares. */
  tag: string;
}

export type ReserveResult =
  | { admitted: true; states: BudgetState[]; reservation: Reservation }
  | { admitted: false; refusedBy: BudgetState; states: BudgetState[] };

/**
 * Counts one model call in every limited window of a key and of its end
 * user at once: requests, tokens and spend. KEYS: the counters, all with
 * the key's hash tag (one slot). ARGV[3i-2], ARGV[3i-1], ARGV[3i]: amount,
 * quota and length in ms of counter i. Nothing is written unless every
 * counter has room: a refused call counts nowhere. A window starts with the
 * first call counted in it (fixed windows). Returns `{refused index or 0,
 * count_1, ttl_1, expires_at_1, …}`: counts after the decision.
 */
export const RESERVE_BUDGETS = `
local n = #KEYS
local counts, ttls, fresh = {}, {}, {}
local refused = 0
for i = 1, n do
  local amount, quota = tonumber(ARGV[3 * i - 2]), tonumber(ARGV[3 * i - 1])
  local ttl = redis.call('pttl', KEYS[i])
  local count = 0
  if ttl > 0 then
    count = tonumber(redis.call('get', KEYS[i]) or '0')
  else
    ttl = tonumber(ARGV[3 * i])
    fresh[i] = true
  end
  counts[i], ttls[i] = count, ttl
  if amount > 0 and count + amount > quota and refused == 0 then refused = i end
end
local out = {refused}
for i = 1, n do
  local expires = 0
  if refused == 0 then
    local amount = tonumber(ARGV[3 * i - 2])
    if fresh[i] then
      redis.call('set', KEYS[i], amount, 'PX', ttls[i])
    else
      redis.call('incrby', KEYS[i], amount)
    end
    counts[i] = counts[i] + amount
    expires = redis.call('pexpiretime', KEYS[i])
  end
  out[3 * i - 1] = counts[i]
  out[3 * i] = ttls[i]
  out[3 * i + 1] = expires
end
return out
`;

/**
 * Replaces a reservation by what was really used: adds `delta_i` (negative:
 * gives back) to each counter whose window is still the one that was
 * counted in (same absolute expiry); a window that has ended since is left
 * alone, so nothing is refunded into (or charged to) its successor. Once per
 * id: the first run leaves a marker in the same slot, so a retry after a
 * lost answer changes nothing more.
 * KEYS: the counters, then the marker; ARGV[2i-1], ARGV[2i]: delta and
 * expiry of counter i. Returns 1 when applied, 0 for a repeat.
 */
export const SETTLE_BUDGETS = `
local marker = KEYS[#KEYS]
if not redis.call('set', marker, 1, 'NX', 'PX', 86400000) then return 0 end
for i = 1, #KEYS - 1 do
  local delta = tonumber(ARGV[2 * i - 1])
  if delta ~= 0 and redis.call('pexpiretime', KEYS[i]) == tonumber(ARGV[2 * i]) then
    redis.call('incrby', KEYS[i], delta)
  end
end
return 1
`;

type Scripted = RedisClient & {
  reserveBudgets(numKeys: number, ...keysAndArgs: (string | number)[]): Promise<number[]>;
  settleBudgets(numKeys: number, ...keysAndArgs: (string | number)[]): Promise<number>;
};

/** What one call asks of each unit. */
export interface Amounts {
  /** 1, or 0 when the gateway already counted the request. */
  requests: number;
  tokens: number;
  /** Nano-USD. */
  spend: number;
}

/** The Redis store could not be asked. */
export class BudgetStoreError extends Error {
  constructor(cause: unknown) {
    super(`budget store failed: ${(cause as Error)?.message ?? String(cause)}`, { cause });
    this.name = "BudgetStoreError";
  }
}

/**
 * Request, token and spend windows of keys and their end users, in Redis,
 * exact across every gateway and service replica that shares it: one script
 * reserves in all of them at once, another settles a reservation once.
 * Counters are `<prefix>:{<keyId>}:<window>` (the gateway's request windows),
 * `<prefix>:{<keyId>}:<unit>:<window>` and, for end user U,
 * `<prefix>:{<keyId>}:eu:<U, URI-encoded>:<unit>:<window>`: one slot per key,
 * so the scripts run on Redis Cluster too (Redis 7.0 or later).
 */
export class BudgetWindows {
  private readonly redis: Scripted;
  private readonly prefix: string;
  private readonly windowMs: (unit: Unit, window: string) => number;

  /** `windowMs` shortens windows in tests. */
  constructor(
    redis: RedisClient,
    prefix = "gw:rl",
    windowMs: (unit: Unit, window: string) => number = (unit, window) =>
      UNIT_WINDOW_SECONDS[unit][window]! * 1000,
  ) {
    if (!("reserveBudgets" in redis)) {
      redis.defineCommand("reserveBudgets", { lua: RESERVE_BUDGETS });
      redis.defineCommand("settleBudgets", { lua: SETTLE_BUDGETS });
    }
    this.redis = redis as Scripted;
    this.prefix = prefix;
    this.windowMs = windowMs;
  }

  tag(keyId: string): string {
    return `${this.prefix}:{${keyId}}`;
  }

  /** Every limited window of the key and of `user`, with what `amounts` counts in each. */
  counters(keyId: string, user: string, limits: Limits, amounts: Amounts): BudgetCounter[] {
    const tag = this.tag(keyId);
    const of = (scope: Scope, unitLimits: UnitLimits | undefined, base: string) =>
      limitEntries(unitLimits).map(
        (e): BudgetCounter => ({
          scope,
          unit: e.unit,
          window: e.window,
          quota: e.unit === "spend" ? Math.round(e.limit * NANO_USD_PER_USD) : e.limit,
          ms: this.windowMs(e.unit, e.window),
          amount: amounts[e.unit],
          key:
            scope === "key" && e.unit === "requests"
              ? `${base}:${e.window}`
              : `${base}:${e.unit}:${e.window}`,
        }),
      );
    return [
      ...of("key", limits, tag),
      ...of("endUser", limits.endUser, `${tag}:eu:${encodeURIComponent(user)}`),
    ];
  }

  /** Counts `counters` all at once, or nowhere when any has no room. */
  async reserve(keyId: string, counters: BudgetCounter[]): Promise<ReserveResult> {
    const args: (string | number)[] = counters.map((c) => c.key);
    for (const c of counters) args.push(c.amount, c.quota, c.ms);
    let reply: number[];
    try {
      reply = await this.redis.reserveBudgets(counters.length, ...args);
    } catch (err) {
      throw new BudgetStoreError(err);
    }
    const states = counters.map((c, i) => stateOf(c, reply[3 * i + 1]!, reply[3 * i + 2]!));
    const refused = reply[0]!;
    if (refused > 0) return { admitted: false, refusedBy: states[refused - 1]!, states };
    return {
      admitted: true,
      states,
      reservation: { counters, tag: this.tag(keyId), expiresAt: counters.map((_, i) => reply[3 * i + 3]!) },
    };
  }

  /**
   * Replaces what `reservation` counted by `used` (per unit), in the windows
   * that still run; `id` names the settlement, so running it again changes
   * nothing more. Returns whether this run applied it.
   */
  async settle(reservation: Reservation, used: Amounts, id: string): Promise<boolean> {
    const { counters, expiresAt } = reservation;
    const args: (string | number)[] = [...counters.map((c) => c.key), `${reservation.tag}:settled:${id}`];
    for (const [i, c] of counters.entries()) args.push(used[c.unit] - c.amount, expiresAt[i]!);
    try {
      return (await this.redis.settleBudgets(counters.length + 1, ...args)) === 1;
    } catch (err) {
      throw new BudgetStoreError(err);
    }
  }

  /** Current standing of the key's windows and, with `user`, that end user's, counting nothing. */
  async peek(keyId: string, user: string | undefined, limits: Limits): Promise<BudgetState[]> {
    const counters = this.counters(
      keyId,
      user ?? "",
      user === undefined ? { ...limits, endUser: undefined } : limits,
      {
        requests: 0,
        tokens: 0,
        spend: 0,
      },
    );
    if (counters.length === 0) return [];
    const pipeline = this.redis.pipeline();
    for (const c of counters) pipeline.get(c.key).pttl(c.key);
    let replies: [Error | null, unknown][];
    try {
      replies = (await pipeline.exec()) ?? [];
    } catch (err) {
      throw new BudgetStoreError(err);
    }
    return counters.map((c, i) => {
      const ttl = Number(replies[2 * i + 1]?.[1] ?? -2);
      const count = ttl > 0 ? Number(replies[2 * i]?.[1] ?? 0) : 0;
      return stateOf(c, count, ttl > 0 ? ttl : c.ms);
    });
  }
}

function stateOf(c: BudgetCounter, count: number, ttl: number): BudgetState {
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
