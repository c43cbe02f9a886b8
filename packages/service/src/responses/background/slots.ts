import type { RedisClient } from "@gw/core/redis";

/**
 * Takes a key's slot for one more background response in flight, unless it
 * holds `limit` already (a retry of the same response takes nothing more).
 * Entries older than `ARGV[4]` ms are dropped first: a run that ended
 * without giving its slot back cannot hold it forever.
 * KEYS[1]: the key's set; ARGV: response id, limit, now (ms), longest life (ms).
 */
const TAKE = `
redis.call('zremrangebyscore', KEYS[1], '-inf', tonumber(ARGV[3]) - tonumber(ARGV[4]))
if redis.call('zscore', KEYS[1], ARGV[1]) then return 1 end
if redis.call('zcard', KEYS[1]) >= tonumber(ARGV[2]) then return 0 end
redis.call('zadd', KEYS[1], ARGV[3], ARGV[1])
redis.call('pexpire', KEYS[1], ARGV[4])
return 1`;

type Scripted = RedisClient & {
  takeBackgroundSlot(key: string, id: string, limit: number, now: number, maxAgeMs: number): Promise<number>;
};

/**
 * The background responses each API key has in flight
 * (`BACKGROUND_RESPONSES_PER_KEY`), in Redis: one sorted set per key,
 * `gw:bg:{<keyId>}:running`, of response ids. A slot is taken by one script
 * (the count and the add together) and given back by id, so giving it back
 * twice (a run that ended, then its recovery) frees it once.
 */
export class BackgroundSlots {
  private readonly redis: Scripted;
  private readonly options: { limit: number; maxAgeMs: number; now: () => number };

  constructor(redis: RedisClient, options: { limit: number; maxAgeMs: number; now: () => number }) {
    this.options = options;
    if (!("takeBackgroundSlot" in redis))
      redis.defineCommand("takeBackgroundSlot", { numberOfKeys: 1, lua: TAKE });
    this.redis = redis as Scripted;
  }

  /** Whether the key had room for `responseId` (it now holds a slot for it). */
  async take(keyId: string, responseId: string): Promise<boolean> {
    const taken = await this.redis.takeBackgroundSlot(
      slotsKey(keyId),
      responseId,
      this.options.limit,
      this.options.now(),
      this.options.maxAgeMs,
    );
    return taken === 1;
  }

  async give(keyId: string, responseId: string): Promise<void> {
    await this.redis.zrem(slotsKey(keyId), responseId);
  }

  /** How many the key has in flight. */
  count(keyId: string): Promise<number> {
    return this.redis.zcard(slotsKey(keyId));
  }
}

const slotsKey = (keyId: string) => `gw:bg:{${keyId}}:running`;
