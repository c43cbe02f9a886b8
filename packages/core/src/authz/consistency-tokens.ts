import { Cluster } from "ioredis";
import { type Clock, systemClock } from "../clock.ts";
import type { RedisClient } from "../redis.ts";

/**
 * The ZedToken of a resource's last write (none once the resource is
 * deleted), and whether that write is recent enough to need full consistency.
 */
export interface LastWrite {
  token?: string;
  recent: boolean;
  /**
   * When the first expiring grant written to the resource that ends after
   * the time `get` was given ends (ms since the epoch): a decision about the
   * resource may change then without a write.
   */
  nextExpiry?: number;
  /**
   * The stretch of unbroken connection to Redis this was read in: it changes
   * whenever the connection was lost or a command of the store failed, after
   * which a decision kept under an earlier one no longer holds (see
   * `RedisConsistencyTokens`). Absent: the store does not tell.
   */
  session?: number;
}

/** What a check knows of a resource's last write when Redis could not be read. */
export const UNKNOWN_LAST_WRITE = Symbol("unknown last write");
export type LastWriteRead = LastWrite | undefined | typeof UNKNOWN_LAST_WRITE;

/**
 * The ZedToken of the last write to each resource, shared by all replicas
 * through Redis, so a check anywhere right after a grant or revoke asks
 * SpiceDB for data at least as fresh as that write (and nothing fresher).
 */
export interface ConsistencyTokens {
  /** With `expiringAfter` (ms since the epoch), also the first grant expiry after it, in the same round trip. */
  get(resourceKey: string, expiringAfter?: number): Promise<LastWrite | undefined>;
  /** `expiries`: when grants this write made end (ms since the epoch), kept until they pass. */
  set(resourceKey: string, token: string, expiries?: number[]): Promise<void>;
  /** Drops the token of a deleted resource; checks right after still see the delete. */
  forget(resourceKey: string): Promise<void>;
  /** Drops every key of a resource whose content is gone (expired and swept), writing none. */
  drop(resourceKey: string): Promise<void>;
}

/** After a day, SpiceDB's own snapshot (seconds old at most) is newer than any write we remember. */
const TOKEN_TTL_SECONDS = 86_400;
/** Grant expiries are kept this long after they pass (clocks of replicas and SpiceDB may differ a little). */
const EXPIRY_KEPT_MS = 60_000;

/**
 * `gw:zedtoken:{<type>:<org>/<id>}` holds the token; `…:recent` exists for
 * `recentWriteMs` after each write. "Recent" is Redis's own expiry, so no
 * replica compares its clock with another's. `…:expiries` is a sorted set of
 * the times the resource's expiring grants end, kept until the last has
 * passed. The keys share a hash tag: one slot, one round trip, also on
 * Redis Cluster.
 *
 * What Redis says is trusted only once this process has been connected to it
 * without a break for `recentWriteMs` (docs/adr/0017-zedtokens-through-redis-outages.md).
 * A write acknowledged while Redis was away has no token there, and a Redis
 * that restarted may have lost the tokens it had: either way a token read
 * afterwards may be older than a write already acknowledged. So after the
 * connection is lost (or any command of this store fails), every read is
 * reported "recent" (fully consistent, no decision kept) until Redis has
 * answered for `recentWriteMs`, by which time SpiceDB's snapshots hold every
 * write made before; and the session changes, so decisions kept before no
 * longer hold. A process starts that way too: it cannot know what Redis lost
 * before it connected.
 */
export class RedisConsistencyTokens implements ConsistencyTokens {
  private readonly redis: Scripted;
  private readonly recentWriteMs: number;
  /** Its wall time drops expiries long past (grants' expiries are epoch milliseconds); its `now` times the distrust after a break. */
  private readonly clock: Clock;
  private readonly connection: ConnectionBreaks;
  /** The session whose reads are trusted from `at` (`clock.now()`); none before the first read. */
  private trusted: { session: number; at: number } | undefined;

  constructor(redis: RedisClient, recentWriteMs: number, clock: Clock = systemClock) {
    if (!("lastWrite" in redis)) redis.defineCommand("lastWrite", { numberOfKeys: 3, lua: LAST_WRITE });
    this.redis = redis as Scripted;
    this.recentWriteMs = recentWriteMs;
    this.clock = clock;
    this.connection = connectionBreaks(redis);
  }

  async get(resourceKey: string, expiringAfter?: number): Promise<LastWrite> {
    const key = tokenKey(resourceKey);
    const before = this.connection.count;
    let token: string | null | undefined;
    let recent: string | null | undefined;
    let nextExpiry: number | undefined;
    try {
      if (expiringAfter === undefined) {
        [token, recent] = await this.redis.mget(key, `${key}:recent`);
      } else {
        // One script rather than a pipeline of two commands: half the client's CPU per check.
        let first: string | null | undefined;
        [token, recent, first] = await this.redis.lastWrite(
          key,
          `${key}:recent`,
          `${key}:expiries`,
          `(${expiringAfter}`,
        );
        if (first) nextExpiry = Number(first);
      }
    } catch (err) {
      this.connection.count++;
      throw err;
    }
    const session = this.connection.count;
    const settled = this.settled(session, before);
    return {
      ...(token ? { token } : {}),
      recent: recent !== null || !settled,
      ...(nextExpiry !== undefined ? { nextExpiry } : {}),
      session,
    };
  }

  /**
   * Whether reads of `session` are trusted yet: the first read that answers
   * in a new session starts its `recentWriteMs`. A read during which the
   * connection broke (`before`, the session it was sent in) starts nothing.
   */
  private settled(session: number, before: number): boolean {
    if (session !== before) return false;
    const now = this.clock.now();
    if (this.trusted?.session !== session) this.trusted = { session, at: now + this.recentWriteMs };
    return now >= this.trusted.at;
  }

  async set(resourceKey: string, token: string, expiries: number[] = []): Promise<void> {
    const key = tokenKey(resourceKey);
    const write = this.redis.multi().set(key, token, "EX", TOKEN_TTL_SECONDS);
    if (expiries.length > 0) {
      const set = `${key}:expiries`;
      const last = Math.max(...expiries) + EXPIRY_KEPT_MS;
      write
        .zadd(set, ...expiries.flatMap((at) => [at, String(at)]))
        .zremrangebyscore(set, "-inf", this.clock.wall() - EXPIRY_KEPT_MS)
        // The set lives until its last expiry has passed: set on a new key, only lengthened after.
        .pexpireat(set, last, "NX")
        .pexpireat(set, last, "GT");
    }
    await this.markRecent(key, write);
  }

  async forget(resourceKey: string): Promise<void> {
    const key = tokenKey(resourceKey);
    await this.markRecent(key, this.redis.multi().del(key, `${key}:expiries`));
  }

  async drop(resourceKey: string): Promise<void> {
    const key = tokenKey(resourceKey);
    // One slot (the keys share a hash tag): one command, also on Redis Cluster.
    await this.broken(this.redis.del(key, `${key}:expiries`, `${key}:recent`));
  }

  private async markRecent(key: string, write: ReturnType<RedisClient["multi"]>): Promise<void> {
    if (this.recentWriteMs > 0) write.set(`${key}:recent`, "1", "PX", this.recentWriteMs);
    const results = await this.broken(write.exec());
    const failed = results?.find(([err]) => err)?.[0];
    if (failed) throw failed;
  }

  /** A write Redis did not take is a break too: its token is missing there from now on. */
  private async broken<T>(command: Promise<T>): Promise<T> {
    try {
      return await command;
    } catch (err) {
      this.connection.count++;
      throw err;
    }
  }
}

/** How often a Redis client's connection broke, counted from its own events (one count per client, whoever reads it). */
interface ConnectionBreaks {
  count: number;
}

const breaksOf = new WeakMap<RedisClient, ConnectionBreaks>();

/**
 * Counts every lost connection of `redis` ("close"; for a Redis Cluster,
 * also a node's connection ended or made: "-node", "+node"). Everything read
 * over a lost connection may be older than what Redis holds now, and a
 * server that came back may have lost what it held.
 */
function connectionBreaks(redis: RedisClient): ConnectionBreaks {
  let breaks = breaksOf.get(redis);
  if (!breaks) {
    const counted: ConnectionBreaks = { count: 0 };
    const broke = () => {
      counted.count++;
    };
    redis.on("close", broke);
    if (redis instanceof Cluster) {
      redis.on("-node", broke);
      redis.on("+node", broke);
    }
    breaksOf.set(redis, counted);
    breaks = counted;
  }
  return breaks;
}

const tokenKey = (resourceKey: string) => `gw:zedtoken:{${resourceKey}}`;

/** KEYS: token, recent marker, expiries; ARGV: the lower bound of expiries asked for. Replies token, marker, first expiry (each nil when absent). */
const LAST_WRITE = `
local last = redis.call('MGET', KEYS[1], KEYS[2])
local expiry = redis.call('ZRANGEBYSCORE', KEYS[3], ARGV[1], '+inf', 'LIMIT', 0, 1)
return {last[1], last[2], expiry[1]}
`;

type Scripted = RedisClient & {
  lastWrite(
    token: string,
    recent: string,
    expiries: string,
    after: string,
  ): Promise<[string | null, string | null, string | null]>;
};

/**
 * After a resource's relationships are deleted, the delete is the last write
 * of the resource and of its organization (for lookups): checks right after
 * ask for data at least as fresh as it, whatever
 * `SPICEDB_FULLY_CONSISTENT_AFTER_WRITE_MS` says, and decisions kept before
 * it no longer match. Without the delete's token, the resource's token is
 * dropped (with the "recent" marker, so checks right after still see the
 * delete). The delete has landed whatever happens here: a failure is
 * returned, for the caller to log, not thrown.
 */
export async function recordDeletion(
  tokens: ConsistencyTokens,
  keys: { resource: string; organization: string },
  token: string | undefined,
): Promise<Error | undefined> {
  const results = await Promise.allSettled(
    token
      ? [tokens.set(keys.resource, token), tokens.set(keys.organization, token)]
      : [tokens.forget(keys.resource)],
  );
  const failed = results.find((r) => r.status === "rejected");
  return failed ? (failed.reason as Error) : undefined;
}
