import { type Limits, WINDOW_SECONDS, WINDOWS, type Window } from "@gw/core";
import type { Redis } from "ioredis";
import { type Decision, type QuotaLimiter, QuotaStoreError, type WindowState } from "./quota.ts";

/**
 * Decides one request against every window of a key at once, in Redis.
 * KEYS: the counter of each window, all with the key's hash tag (one slot).
 * ARGV[1]: points to take (0 only reads); ARGV[2i], ARGV[2i+1]: quota and
 * length in ms of window i. Nothing is written unless every window has room:
 * a refused request counts nowhere, not even for a moment. A window starts
 * with the first request in it (fixed windows). Returns
 * `{refused window index or 0, count_1, ttl_1, …}`, counts after the
 * decision.
 */
export const DECIDE_WINDOWS = `
local points = tonumber(ARGV[1])
local out = {0}
local fresh = {}
for i = 1, #KEYS do
  local ttl = redis.call('pttl', KEYS[i])
  local count = 0
  if ttl > 0 then
    count = tonumber(redis.call('get', KEYS[i]))
  else
    ttl = tonumber(ARGV[2 * i + 1])
    fresh[i] = true
  end
  if out[1] == 0 and points > 0 and count + points > tonumber(ARGV[2 * i]) then out[1] = i end
  out[2 * i] = count
  out[2 * i + 1] = ttl
end
if out[1] == 0 and points > 0 then
  for i = 1, #KEYS do
    if fresh[i] then
      redis.call('set', KEYS[i], points, 'PX', out[2 * i + 1])
    else
      redis.call('incrby', KEYS[i], points)
    end
    out[2 * i] = out[2 * i] + points
  end
end
return out
`;

type Decider = Redis & {
  decideWindows(numKeys: number, ...keysAndArgs: (string | number)[]): Promise<number[]>;
};

/**
 * A key's quotas in Redis, exact across every replica that shares it: one
 * script, one round trip, whether the request is admitted or refused.
 * Counters are `<prefix>:{<keyId>}:<window>`, one slot per API key, so the
 * script runs on Redis Cluster too.
 */
export class RedisWindows implements QuotaLimiter {
  private readonly redis: Decider;
  private readonly prefix: string;
  private readonly seconds: Record<Window, number>;

  /** `seconds` shortens windows in tests. */
  constructor(redis: Redis, prefix = "gw:rl", seconds: Record<Window, number> = WINDOW_SECONDS) {
    if (!("decideWindows" in redis)) redis.defineCommand("decideWindows", { lua: DECIDE_WINDOWS });
    this.redis = redis as Decider;
    this.prefix = prefix;
    this.seconds = seconds;
  }

  async decide(keyId: string, limits: Limits): Promise<Decision> {
    const { states, refused } = await this.run(keyId, limits, 1);
    if (refused === 0) return { allowed: true, windows: states };
    return { allowed: false, refusedBy: states[refused - 1]!, windows: states };
  }

  async peek(keyId: string, limits: Limits): Promise<WindowState[]> {
    return (await this.run(keyId, limits, 0)).states;
  }

  private async run(keyId: string, limits: Limits, points: number) {
    const windows = WINDOWS.filter((w) => limits[w] !== undefined);
    const args: (string | number)[] = windows.map((w) => `${this.prefix}:{${keyId}}:${w}`);
    args.push(points);
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
        remaining: Math.max(0, limits[window]! - reply[2 * i + 1]!),
        resetMs: reply[2 * i + 2]!,
      }),
    );
    return { states, refused: reply[0]! };
  }
}
