import { serviceUnavailable } from "@gw/core/errors";
import type { RedisClient } from "@gw/core/redis";

const key = (family: string) => `oauth:revoked:${family}`;

/**
 * Revoked authorizations of MCP clients (refresh-token families), marked in
 * Redis so that every gateway replica refuses their access tokens at the next
 * call. An access token names its family in `sid`; a mark lives as long as
 * the longest-lived access token of the family could (`MCP_OAUTH_ACCESS_TOKEN_TTL`,
 * plus the clock skew tokens are allowed), after which no such token is valid anyway.
 */
export class RevokedFamilies {
  private readonly redis: RedisClient;
  private readonly ttlSeconds: number;

  /** `accessTokenTtlSeconds`: `MCP_OAUTH_ACCESS_TOKEN_TTL`; `skewSeconds`: the clock skew token verification tolerates. */
  constructor(redis: RedisClient, accessTokenTtlSeconds: number, skewSeconds: number) {
    this.redis = redis;
    this.ttlSeconds = accessTokenTtlSeconds + skewSeconds;
  }

  /** Marks the families revoked; throws when Redis does not take every mark (the caller's revoke then fails too). */
  async mark(families: Iterable<string>): Promise<void> {
    const unique = [...new Set(families)];
    if (unique.length === 0) return;
    const multi = this.redis.multi();
    for (const family of unique) multi.set(key(family), "1", "EX", this.ttlSeconds);
    const answers = await multi.exec();
    if (!answers || answers.some(([err]) => err))
      throw serviceUnavailable("The revocation could not be recorded; try again");
  }

  /** Whether the family is revoked; a Redis failure is a 503 (an OAuth-issued token is never accepted unchecked). */
  async isRevoked(family: string): Promise<boolean> {
    try {
      return (await this.redis.exists(key(family))) === 1;
    } catch (err) {
      throw serviceUnavailable("Token revocation cannot be checked now; try again", err);
    }
  }
}
