import type { RedisClient } from "../redis.ts";

/**
 * The ZedToken of a resource's last write (none once the resource is
 * deleted), and whether that write is recent enough to need full consistency.
 */
export interface LastWrite {
  token?: string;
  recent: boolean;
}

/**
 * The ZedToken of the last write to each resource, shared by all replicas
 * through Redis, so a check anywhere right after a grant or revoke asks
 * SpiceDB for data at least as fresh as that write (and nothing fresher).
 */
export interface ConsistencyTokens {
  get(resourceKey: string): Promise<LastWrite | undefined>;
  set(resourceKey: string, token: string): Promise<void>;
  /** Drops the token of a deleted resource; checks right after still see the delete. */
  forget(resourceKey: string): Promise<void>;
}

/** After a day, SpiceDB's own snapshot (seconds old at most) is newer than any write we remember. */
const TOKEN_TTL_SECONDS = 86_400;

/**
 * `gw:zedtoken:{<type>:<org>/<id>}` holds the token; `…:recent` exists for
 * `recentWriteMs` after each write. "Recent" is Redis's own expiry, so no
 * replica compares its clock with another's. Both keys share a hash tag:
 * one slot, one round trip, also on Redis Cluster.
 */
export class RedisConsistencyTokens implements ConsistencyTokens {
  private readonly redis: RedisClient;
  private readonly recentWriteMs: number;

  constructor(redis: RedisClient, recentWriteMs: number) {
    this.redis = redis;
    this.recentWriteMs = recentWriteMs;
  }

  async get(resourceKey: string): Promise<LastWrite | undefined> {
    const key = tokenKey(resourceKey);
    const [token, recent] = await this.redis.mget(key, `${key}:recent`);
    if (token) return { token, recent: recent !== null };
    return recent !== null ? { recent: true } : undefined;
  }

  async set(resourceKey: string, token: string): Promise<void> {
    const key = tokenKey(resourceKey);
    await this.markRecent(key, this.redis.multi().set(key, token, "EX", TOKEN_TTL_SECONDS));
  }

  async forget(resourceKey: string): Promise<void> {
    const key = tokenKey(resourceKey);
    await this.markRecent(key, this.redis.multi().del(key));
  }

  private async markRecent(key: string, write: ReturnType<RedisClient["multi"]>): Promise<void> {
    if (this.recentWriteMs > 0) write.set(`${key}:recent`, "1", "PX", this.recentWriteMs);
    const results = await write.exec();
    const failed = results?.find(([err]) => err)?.[0];
    if (failed) throw failed;
  }
}

const tokenKey = (resourceKey: string) => `gw:zedtoken:{${resourceKey}}`;

/**
 * After a resource's relationships are deleted: its own token is dropped
 * (with the "recent" marker, so checks right after still see the delete) and
 * the delete becomes its organization's last write, for lookups. The delete
 * has landed whatever happens here: a failure is returned, for the caller to
 * log, not thrown.
 */
export async function recordDeletion(
  tokens: ConsistencyTokens,
  keys: { resource: string; organization: string },
  token: string | undefined,
): Promise<Error | undefined> {
  const results = await Promise.allSettled([
    tokens.forget(keys.resource),
    ...(token ? [tokens.set(keys.organization, token)] : []),
  ]);
  const failed = results.find((r) => r.status === "rejected");
  return failed ? (failed.reason as Error) : undefined;
}
