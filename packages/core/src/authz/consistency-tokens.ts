import type { Redis } from "ioredis";

/** The ZedToken of a resource's last write, and when it was recorded (ms since the epoch). */
export interface LastWrite {
  token: string;
  at: number;
}

/**
 * The ZedToken of the last write to each resource, shared by all replicas
 * through Redis, so a check anywhere right after a grant or revoke asks
 * SpiceDB for data at least as fresh as that write (and nothing fresher).
 */
export interface ConsistencyTokens {
  get(resourceKey: string): Promise<LastWrite | undefined>;
  set(resourceKey: string, token: string): Promise<void>;
}

/** After a day, SpiceDB's own snapshot (seconds old at most) is newer than any write we remember. */
const TOKEN_TTL_SECONDS = 86_400;

export class RedisConsistencyTokens implements ConsistencyTokens {
  private readonly redis: Redis;

  constructor(redis: Redis) {
    this.redis = redis;
  }

  async get(resourceKey: string): Promise<LastWrite | undefined> {
    const value = await this.redis.get(`gw:zedtoken:${resourceKey}`);
    if (!value) return undefined;
    const bar = value.indexOf("|");
    return { at: Number(value.slice(0, bar)), token: value.slice(bar + 1) };
  }

  async set(resourceKey: string, token: string): Promise<void> {
    await this.redis.set(`gw:zedtoken:${resourceKey}`, `${Date.now()}|${token}`, "EX", TOKEN_TTL_SECONDS);
  }
}
