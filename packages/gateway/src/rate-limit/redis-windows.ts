import { type Limits, WINDOW_SECONDS, WINDOWS, type Window } from "@gw/core/limits";
import type { RedisClient } from "@gw/core/redis";
import { type Decision, type QuotaLimiter, QuotaStoreError, type WindowState } from "./quota.ts";

/**
 * Decides one request, or takes a lease of several, against every window of
 * a key at once, in Redis.
 * KEYS: the counter of each window, all with the key's hash tag (one slot).
 * ARGV[1]: points wanted (0 only reads); ARGV[2i], ARGV[2i+1]: quota and
 * length in ms of window i.
 * More than one point is granted only while every window stays at most half
 * full with them; otherwise one point, if every window has room for it.
 * Nothing is written unless every window has room: a refused request counts
 * nowhere, not even for a moment. A window starts with the first request in
 * it (fixed windows). Returns `{refused window index or 0, points granted,
 * count_1, ttl_1, expires_at_1, …}`, counts after the decision.
 */
export const DECIDE_WINDOWS = `
local want = tonumber(ARGV[1])
local n = #KEYS
local counts, ttls, fresh = {}, {}, {}
local lease, one, refused = want > 1, true, 0
for i = 1, n do
  local quota = tonumber(ARGV[2 * i])
  local ttl = redis.call('pttl', KEYS[i])
  local count = 0
  if ttl > 0 then
    count = tonumber(redis.call('get', KEYS[i]))
  else
    ttl = tonumber(ARGV[2 * i + 1])
    fresh[i] = true
  end
  counts[i], ttls[i] = count, ttl
  if count + want > math.floor(quota / 2) then lease = false end
  if count + 1 > quota then
    one = false
    if refused == 0 then refused = i end
  end
end
local granted = 0
if want > 0 then
  if lease then granted = want elseif one then granted = 1 end
end
local out = {0, granted}
if granted == 0 and want > 0 then out[1] = refused end
for i = 1, n do
  local expires = 0
  if granted > 0 then
    if fresh[i] then
      redis.call('set', KEYS[i], granted, 'PX', ttls[i])
    else
      redis.call('incrby', KEYS[i], granted)
    end
    counts[i] = counts[i] + granted
    expires = redis.call('pexpiretime', KEYS[i])
  end
  out[3 * i] = counts[i]
  out[3 * i + 1] = ttls[i]
  out[3 * i + 2] = expires
end
return out
`;

/**
 * Gives back points of a lease that were never used, to each window that
 * counted them, if that window is still the same one (same absolute expiry);
 * a window that has ended since keeps nothing of it. Once per give-back id:
 * the first run leaves a marker, so a retry after a lost answer cannot give
 * the same points back twice.
 * KEYS: the counters, then the marker; ARGV[1]: points; ARGV[1 + i]: expiry
 * of window i.
 */
export const GIVE_BACK = `
local marker = KEYS[#KEYS]
if not redis.call('set', marker, 1, 'NX', 'PX', 86400000) then return 0 end
for i = 1, #KEYS - 1 do
  if redis.call('pexpiretime', KEYS[i]) == tonumber(ARGV[1 + i]) then
    redis.call('decrby', KEYS[i], ARGV[1])
  end
end
return 1
`;

type Scripted = RedisClient & {
  decideWindows(numKeys: number, ...keysAndArgs: (string | number)[]): Promise<number[]>;
  giveBack(numKeys: number, ...keysAndArgs: (string | number)[]): Promise<number>;
};

/** What a decision took from Redis. */
export interface Taken {
  /** 0 when admitted, else 1 + the index of the refusing window. */
  refused: number;
  /** Points counted: 1, a lease of more, or 0 when refused. */
  granted: number;
  states: WindowState[];
  /** The counters and their absolute expiry (ms), to give unused points back. */
  keys: string[];
  /** `<prefix>:{<keyId>}`: the hash tag every key of this API key's windows shares. */
  tag: string;
  expiresAt: number[];
}

/**
 * A key's quotas in Redis, exact across every replica that shares it: one
 * script, one round trip, whether the request is admitted or refused.
 * Counters are `<prefix>:{<keyId>}:<window>`, one slot per API key, so the
 * script runs on Redis Cluster too (Redis 7.0 or later: PEXPIRETIME).
 */
export class RedisWindows implements QuotaLimiter {
  private readonly redis: Scripted;
  private readonly prefix: string;
  private readonly seconds: Record<Window, number>;

  /** `seconds` shortens windows in tests. */
  constructor(redis: RedisClient, prefix = "gw:rl", seconds: Record<Window, number> = WINDOW_SECONDS) {
    if (!("decideWindows" in redis)) {
      redis.defineCommand("decideWindows", { lua: DECIDE_WINDOWS });
      redis.defineCommand("giveBack", { lua: GIVE_BACK });
    }
    this.redis = redis as Scripted;
    this.prefix = prefix;
    this.seconds = seconds;
  }

  async decide(keyId: string, limits: Limits): Promise<Decision> {
    return toDecision(await this.take(keyId, limits, 1));
  }

  async peek(keyId: string, limits: Limits): Promise<WindowState[]> {
    return (await this.take(keyId, limits, 0)).states;
  }

  /** Takes `want` points while every window stays at most half full with them, else one, else none. */
  async take(keyId: string, limits: Limits, want: number): Promise<Taken> {
    const windows = WINDOWS.filter((w) => limits[w] !== undefined);
    const tag = `${this.prefix}:{${keyId}}`;
    const keys = windows.map((w) => `${tag}:${w}`);
    const args: (string | number)[] = [...keys, want];
    for (const w of windows) args.push(limits[w]!, this.seconds[w] * 1000);
    let reply: number[];
    try {
      reply = await this.redis.decideWindows(windows.length, ...args);
    } catch (err) {
      throw new QuotaStoreError(err);
    }
    const states = windows.map(
      (window, i): WindowState => ({
        window,
        limit: limits[window]!,
        seconds: this.seconds[window],
        remaining: Math.max(0, limits[window]! - reply[3 * i + 2]!),
        resetMs: reply[3 * i + 3]!,
      }),
    );
    return {
      refused: reply[0]!,
      granted: reply[1]!,
      states,
      keys,
      tag,
      expiresAt: windows.map((_, i) => reply[3 * i + 4]!),
    };
  }

  /**
   * Gives unused points back to the windows that counted them, where those
   * windows still run. `id` names this give-back: running it again (after a
   * lost answer) changes nothing more.
   */
  async giveBack(
    taken: Pick<Taken, "keys" | "tag" | "expiresAt">,
    points: number,
    id: string,
  ): Promise<void> {
    try {
      await this.redis.giveBack(
        taken.keys.length + 1,
        ...taken.keys,
        `${taken.tag}:given-back:${id}`,
        points,
        ...taken.expiresAt,
      );
    } catch (err) {
      throw new QuotaStoreError(err);
    }
  }
}

export function toDecision(taken: Pick<Taken, "refused" | "states">): Decision {
  if (taken.refused === 0) return { allowed: true, windows: taken.states };
  return { allowed: false, refusedBy: taken.states[taken.refused - 1]!, windows: taken.states };
}
