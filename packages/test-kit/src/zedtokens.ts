import type { RedisClient } from "@gw/core/redis";

/**
 * What is left to live of a ZedToken key whose write is no longer recent,
 * for any `SPICEDB_FULLY_CONSISTENT_AFTER_WRITE_MS` (at most 10 minutes)
 * with the default `SPICEDB_ZEDTOKEN_TTL` (an hour).
 */
const PAST_RECENT_MS = 600_000;

/**
 * Ends the "recent" window of the resources' last writes (`gw:zedtoken:{…}`
 * keys, as Redis names them), as Redis does by itself once the window has
 * passed: the write is recent while its key has more than the TTL less the
 * window to live. Keys that do not exist are left alone.
 */
export async function pastRecentWindow(redis: RedisClient, ...keys: string[]): Promise<void> {
  for (const key of keys) {
    const left = await redis.pttl(key);
    if (left > PAST_RECENT_MS) await redis.pexpire(key, PAST_RECENT_MS);
  }
}
