import { Cluster } from "ioredis";
import { type Clock, systemClock } from "../clock.ts";
import { type RedisClient, sentTogether } from "../redis.ts";
import {
  leasedResource,
  newWriteId,
  TOKEN_WRITES_CHANNEL,
  type TokenLeaseHolder,
  untilApplied,
  writeMessage,
} from "./token-leases.ts";

/**
 * The ZedToken of a resource's last write (none once the resource is
 * deleted), and whether that write is recent enough to need full consistency.
 */
export interface LastWrite {
  token?: string;
  recent: boolean;
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
  get(resourceKey: string): Promise<LastWrite | undefined>;
  set(resourceKey: string, token: string): Promise<void>;
  /** Drops the token of a deleted resource; checks right after still see the delete. */
  forget(resourceKey: string): Promise<void>;
  /** Drops every key of a resource whose content is gone (expired and swept), writing none. */
  drop(resourceKey: string): Promise<void>;
  /** Runs `send`, whose commands (`set`s) then leave in one write where the store can (`sentTogether`). */
  together?<T>(send: () => T): T;
}

/** The tokens `sets` sends, sent together where the store can. */
export function setTogether(tokens: ConsistencyTokens, sets: () => Promise<void>[]): Promise<void>[] {
  return tokens.together ? tokens.together(sets) : sets();
}

/** How long a resource's token is kept after its last write by default (`SPICEDB_ZEDTOKEN_TTL`). */
export const DEFAULT_TOKEN_TTL_MS = 3_600_000;
/**
 * A token is kept at least this much longer than the recent window and the
 * longest a decision is kept together (`SPICEDB_ZEDTOKEN_TTL` is checked
 * against it), and a cached answer read under "no token" lives this much
 * less than a token: neither outlives a token written after it was asked.
 */
export const TOKEN_TTL_MARGIN_MS = 60_000;

/**
 * `gw:zedtoken:{<type>:<org>/<id>}` holds the token of the resource's last
 * write for `ttlMs` after it (an hour by default, `SPICEDB_ZEDTOKEN_TTL` in
 * the processes): one key per resource, and only while the resource is hot.
 * The write is "recent" while the key has more than `ttlMs - recentWriteMs`
 * to live, which Redis itself says (`PTTL`), so no replica compares its
 * clock with another's. Once the key is gone, checks ask SpiceDB with
 * `minimize_latency`, whose snapshots hold every write older than the recent
 * window; a kept decision (at most `DECISION_CACHE_MAX_AGE_MS`) and a cached
 * answer read under "no token" never outlive `ttlMs` (`checkSpiceDBEnv` and
 * the response cache see to it), so "no token" coming back after a write never
 * revives one. When grants end is kept beside the content (`GrantExpiries`).
 * A deleted resource without a delete token keeps an empty value, so checks
 * right after still see the delete.
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
 *
 * An MCP server's token is leased (`token-leases.ts`, docs/adr/0027-leased-zedtokens.md):
 * its writes are told to every replica holding a lease and return once each
 * has applied them; a replica given a `TokenLeaseHolder` answers its reads
 * from memory while it holds the lease, and reads Redis otherwise.
 */
export class RedisConsistencyTokens implements ConsistencyTokens {
  private readonly redis: Scripted;
  private readonly recentWriteMs: number;
  private readonly ttlMs: number;
  /** Its `now` times the distrust after a break. */
  private readonly clock: Clock;
  private readonly connection: ConnectionBreaks;
  /** The session whose reads are trusted from `at` (`clock.now()`); none before the first read. */
  private trusted: { session: number; at: number } | undefined;
  /** This process's lease on MCP servers' tokens; none: every read asks Redis. */
  private leases: TokenLeaseHolder | undefined;

  constructor(
    redis: RedisClient,
    recentWriteMs: number,
    clock: Clock = systemClock,
    ttlMs: number = DEFAULT_TOKEN_TTL_MS,
  ) {
    if (!("zedTokenOf" in redis)) {
      redis.defineCommand("zedTokenOf", { numberOfKeys: 1, lua: TOKEN_OF });
      redis.defineCommand("zedTokenWriteTold", { numberOfKeys: 1, lua: WRITE_TOLD });
      redis.defineCommand("zedTokenDropTold", { numberOfKeys: 3, lua: DROP_TOLD });
    }
    this.redis = redis as Scripted;
    this.recentWriteMs = recentWriteMs;
    this.ttlMs = Math.max(ttlMs, recentWriteMs);
    this.clock = clock;
    this.connection = connectionBreaks(redis);
  }

  /** What a `TokenLeaseHolder` for this store is built with. */
  get leaseSettings(): { recentWriteMs: number; ttlMs: number; session: () => number; clock: Clock } {
    return {
      recentWriteMs: this.recentWriteMs,
      ttlMs: this.ttlMs,
      session: () => this.connection.count,
      clock: this.clock,
    };
  }

  /** Answers MCP servers' tokens from `holder` while it holds its lease. */
  holdLeases(holder: TokenLeaseHolder): void {
    this.leases = holder;
  }

  async get(resourceKey: string): Promise<LastWrite> {
    const leases = this.leases && leasedResource(resourceKey) ? this.leases : undefined;
    const kept = leases?.lookup(resourceKey, this.connection.count);
    if (kept) return kept;
    const mark = leases?.mark();
    const before = this.connection.count;
    let token: string | null;
    let recent: number;
    let left: number;
    try {
      // One script: the token and whether the key is younger than the recent window, in one round trip.
      [token, recent, left] = await this.redis.zedTokenOf(
        tokenKey(resourceKey),
        this.ttlMs - this.recentWriteMs,
      );
    } catch (err) {
      this.connection.count++;
      throw err;
    }
    const session = this.connection.count;
    const settled = this.settled(session, before);
    if (leases && mark !== undefined && settled) {
      const recentLeftMs = left - (this.ttlMs - this.recentWriteMs);
      leases.keep(resourceKey, mark, { token: token ?? undefined, leftMs: left, recentLeftMs, session });
    }
    return {
      ...(token ? { token } : {}),
      recent: recent === 1 || !settled,
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

  async set(resourceKey: string, token: string): Promise<void> {
    if (leasedResource(resourceKey)) return this.told(resourceKey, token);
    await this.broken(this.redis.set(tokenKey(resourceKey), token, "PX", this.ttlMs));
  }

  /**
   * A leased token's write (`token`; `null`: dropped), told to the lease
   * holders in the same script, then waited for until each has applied it
   * or its lease has lapsed.
   */
  private async told(resourceKey: string, token: string | null): Promise<void> {
    const writeId = newWriteId();
    const key = tokenKey(resourceKey);
    const message = writeMessage(writeId, resourceKey, token);
    await this.broken(
      token === null
        ? this.redis.zedTokenDropTold(key, `${key}:expiries`, `${key}:recent`, TOKEN_WRITES_CHANNEL, message)
        : this.redis.zedTokenWriteTold(key, token, this.ttlMs, TOKEN_WRITES_CHANNEL, message),
    );
    await this.broken(untilApplied(this.redis, writeId));
  }

  together<T>(send: () => T): T {
    return sentTogether(this.redis, send);
  }

  async forget(resourceKey: string): Promise<void> {
    if (leasedResource(resourceKey)) return this.told(resourceKey, "");
    await this.broken(this.redis.set(tokenKey(resourceKey), "", "PX", this.ttlMs));
  }

  async drop(resourceKey: string): Promise<void> {
    if (leasedResource(resourceKey)) return this.told(resourceKey, null);
    const key = tokenKey(resourceKey);
    // With the keys earlier versions kept beside the token (they share its hash tag: one slot, one command).
    await this.broken(this.redis.del(key, `${key}:expiries`, `${key}:recent`));
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

/**
 * KEYS: the token; ARGV: the time to live above which the write is recent (ms). Replies the token (nil
 * when absent), 1 when recent, and the milliseconds it has left (-2 when absent).
 */
const TOKEN_OF = `
local token = redis.call('GET', KEYS[1])
if not token then return {false, 0, -2} end
local left = redis.call('PTTL', KEYS[1])
if left > tonumber(ARGV[1]) then return {token, 1, left} end
return {token, 0, left}
`;

/** KEYS: the token; ARGV: the token, its time to live (ms), the channel, the message telling it. */
const WRITE_TOLD = `
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
redis.call('PUBLISH', ARGV[3], ARGV[4])
`;

/** KEYS: the token and the keys earlier versions kept beside it; ARGV: the channel, the message telling it. */
const DROP_TOLD = `
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3])
redis.call('PUBLISH', ARGV[1], ARGV[2])
`;

type Scripted = RedisClient & {
  zedTokenOf(token: string, recentAbove: number): Promise<[string | null, number, number]>;
  zedTokenWriteTold(
    key: string,
    token: string,
    ttlMs: number,
    channel: string,
    message: string,
  ): Promise<unknown>;
  zedTokenDropTold(
    key: string,
    expiries: string,
    recent: string,
    channel: string,
    message: string,
  ): Promise<unknown>;
};

/**
 * After a resource's relationships are deleted, the delete is the last write
 * of the resource and of its organization (for lookups): checks right after
 * ask for data at least as fresh as it, whatever
 * `SPICEDB_FULLY_CONSISTENT_AFTER_WRITE_MS` says, and decisions kept before
 * it no longer match. Without the delete's token, the resource's token is
 * replaced by an empty one whose window is recent, so checks right after
 * still see the delete. The delete has landed whatever happens here: a failure is
 * returned, for the caller to log, not thrown.
 */
export async function recordDeletion(
  tokens: ConsistencyTokens,
  keys: { resource: string; organization: string },
  token: string | undefined,
): Promise<Error | undefined> {
  const results = await Promise.allSettled(
    token
      ? setTogether(tokens, () => [tokens.set(keys.resource, token), tokens.set(keys.organization, token)])
      : [tokens.forget(keys.resource)],
  );
  const failed = results.find((r) => r.status === "rejected");
  return failed ? (failed.reason as Error) : undefined;
}
