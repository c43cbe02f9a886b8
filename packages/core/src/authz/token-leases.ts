import { performance } from "node:perf_hooks";
import { setTimeout as sleep } from "node:timers/promises";
import { Cluster } from "ioredis";
import { LRUCache } from "lru-cache";
import { entryBound } from "../bounded-cache.ts";
import { type Clock, systemClock } from "../clock.ts";
import type { Logger } from "../logger.ts";
import { randomHex } from "../random.ts";
import { followChannel, type RedisClient } from "../redis.ts";
import type { LastWrite } from "./consistency-tokens.ts";

/**
 * Leased tokens (docs/adr/0027-leased-zedtokens.md): a replica that holds a
 * lease answers "what was the last write of this resource" from memory, and
 * a write of such a token is told on `TOKEN_WRITES_CHANNEL` and returns only
 * once every holder has applied it or its lease has lapsed, as Chubby's
 * caches are invalidated. Only MCP servers' tokens are leased: every proxied
 * call reads one, and they are written rarely (a write waits for every
 * replica).
 */
export const leasedResource = (resourceKey: string): boolean => resourceKey.startsWith("mcp_server:");

/** Where writes of leased tokens are told, and where holders renew their leases (one channel: one order). */
export const TOKEN_WRITES_CHANNEL = "gw:zedtoken:writes";
/** The holders: a sorted set of holder ids, each scored by the end of its lease on Redis's clock (ms). */
export const TOKEN_LEASES_KEY = "gw:zedtoken:leases";
/** Where the holders of a lease acknowledge one write: a set of their ids, gone a minute later. */
const ackKey = (writeId: string) => `gw:zedtoken:acks:{${writeId}}`;
/** A holder's lease ends this much earlier for itself than for writers: clocks run at slightly different rates. */
const leaseMargin = (leaseMs: number) => 10 + Math.ceil(leaseMs / 100);
/** Most tokens a holder keeps; the least recently read go first (their next read asks Redis). */
const MAX_ENTRIES = 10_000;
/** How often a holder renews its lease, as a fraction of the lease. */
const RENEWALS_PER_LEASE = 4;
/** A writer asks for acknowledgements after 1 ms, then twice as long each time up to this. */
const LONGEST_ACK_POLL_MS = 20;

/**
 * KEYS: the leases. ARGV: the holder, the lease (ms), the channel, the message. Renews and tells it on the
 * channel; the set outlives every lease in it (a gateway with a shorter lease never shortens its life).
 */
const RENEW = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
local keep = tonumber(ARGV[2]) * 4
if redis.call('PTTL', KEYS[1]) < keep then redis.call('PEXPIRE', KEYS[1], keep) end
redis.call('PUBLISH', ARGV[3], ARGV[4])
`;

/** KEYS: the leases. Replies each live holder and the milliseconds its lease has left, flat. */
const HOLDERS = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local held = redis.call('ZRANGE', KEYS[1], '(' .. now, '+inf', 'BYSCORE', 'WITHSCORES')
local out = {}
for i = 1, #held, 2 do
  out[#out + 1] = held[i]
  out[#out + 1] = tonumber(held[i + 1]) - now
end
return out
`;

/** KEYS: the acknowledgements of one write. ARGV: the holder. */
const ACK = `
redis.call('SADD', KEYS[1], ARGV[1])
redis.call('PEXPIRE', KEYS[1], 60000)
`;

type LeaseCommands = RedisClient & {
  zedTokenRenew(
    leases: string,
    holder: string,
    leaseMs: number,
    channel: string,
    message: string,
  ): Promise<unknown>;
  zedTokenHolders(leases: string): Promise<(string | number)[]>;
  zedTokenAck(acks: string, holder: string): Promise<unknown>;
};

function withLeaseCommands(redis: RedisClient): LeaseCommands {
  if (!("zedTokenRenew" in redis)) {
    redis.defineCommand("zedTokenRenew", { numberOfKeys: 1, lua: RENEW });
    redis.defineCommand("zedTokenHolders", { numberOfKeys: 1, lua: HOLDERS });
    redis.defineCommand("zedTokenAck", { numberOfKeys: 1, lua: ACK });
  }
  return redis as LeaseCommands;
}

/** What a write of a leased token tells the holders: `w`, the write's id, the resource, and its token or `\u0000` (dropped). */
export function writeMessage(writeId: string, resourceKey: string, token: string | null): string {
  return ["w", writeId, resourceKey, token ?? "\u0000"].join("\u0001");
}

/** A fresh id for one write of a leased token. */
export const newWriteId = (): string => randomHex(24);

/**
 * Once a leased token is written and told (`writeMessage` with `writeId`):
 * waits until every holder whose lease was live once it was told
 * has acknowledged it, or until that lease has lapsed (at most the lease).
 * Asked after the write, so a holder that took its lease later read the
 * token after it was written.
 */
export async function untilApplied(redis: RedisClient, writeId: string): Promise<void> {
  const leases = withLeaseCommands(redis);
  const held = await leases.zedTokenHolders(TOKEN_LEASES_KEY);
  if (held.length === 0) return;
  const from = performance.now();
  const pending = new Map<string, number>();
  for (let i = 0; i < held.length; i += 2) pending.set(String(held[i]), from + Number(held[i + 1]) + 1);
  for (let pause = 1; ; pause = Math.min(pause * 2, LONGEST_ACK_POLL_MS)) {
    for (const holder of await redis.smembers(ackKey(writeId))) pending.delete(holder);
    const now = performance.now();
    for (const [holder, lapses] of pending) if (now >= lapses) pending.delete(holder);
    if (pending.size === 0) return;
    await sleep(pause);
  }
}

/** Seams for tests (none in production). */
export interface TokenLeaseHooks {
  /** Runs before a told write is applied; what is told after it waits for it. A test holds it to force an interleaving. */
  beforeApply?: (resourceKey: string) => Promise<void> | void;
}

interface Entry {
  token: string | undefined;
  /** The process clock's `now()` until which the write is recent (fully consistent checks). */
  recentUntil: number;
  /** The process clock's `now()` at which Redis drops the token: the entry goes then too. */
  expiresAt: number;
  /** The command connection's session it holds for (`LastWrite.session`). */
  session: number;
}

/** What a read of Redis said of a token, for `keep`. */
export interface TokenRead {
  token: string | undefined;
  /** Milliseconds the token has left in Redis; negative when there is none. */
  leftMs: number;
  /** Milliseconds the write stays recent. */
  recentLeftMs: number;
  session: number;
}

/**
 * One process's lease on the leased tokens, and the tokens it keeps while
 * it holds it. It holds the lease while its subscription to
 * `TOKEN_WRITES_CHANNEL` is live and its last renewal came back on that
 * channel less than the lease ago (less a margin): a renewal is told on the
 * same channel as the writes, so one that came back was preceded by every
 * write told before it. A write told while the lease holds is applied before
 * it is acknowledged, and its writer waits for the acknowledgement or for the
 * lease to lapse, so nothing kept here is older than a write whose writer has
 * returned. Everything kept is dropped when the subscription is lost, and a
 * read of Redis that a told write overtook is not kept. The lease is timed by
 * the monotonic clock, as Redis times it in real time; a kept token's recent
 * window and end by the process's clock, as the store's distrust after a break.
 */
export class TokenLeaseHolder {
  readonly id = randomHex(16);
  private readonly redis: LeaseCommands;
  private readonly subscriber: RedisClient;
  private readonly leaseMs: number;
  private readonly recentWriteMs: number;
  private readonly ttlMs: number;
  private readonly clock: Clock;
  private readonly logger: Logger | undefined;
  private readonly hooks: TokenLeaseHooks;
  private readonly entries = new LRUCache<string, Entry>(entryBound(MAX_ENTRIES));
  /** Its subscription to `TOKEN_WRITES_CHANNEL`; the lease holds only while it is live. */
  private feed: ReturnType<typeof followChannel> | undefined;
  private closed = false;
  /** `performance.now()` until which the lease holds here. */
  private validUntil = 0;
  /** Bumped by every told write and every lost subscription: a read that spans a change is not kept. */
  private generation = 0;
  private renewal = 0;
  /** When each renewal not yet heard back was sent. */
  private readonly sent = new Map<number, number>();
  private timer: NodeJS.Timeout | undefined;
  /** Told messages in order, while a hook may hold one. */
  private applying: Promise<void> = Promise.resolve();
  /** The session of the command connection (`RedisConsistencyTokens`): a told write is kept for it. */
  private readonly session: () => number;

  constructor(options: {
    redis: RedisClient;
    /** A connection in subscriber mode (it may listen to other channels too). */
    subscriber: RedisClient;
    leaseMs: number;
    recentWriteMs: number;
    ttlMs: number;
    session: () => number;
    /** The process's clock (recent windows); the system clock by default. */
    clock?: Clock | undefined;
    logger?: Logger | undefined;
    hooks?: TokenLeaseHooks | undefined;
  }) {
    // Messages between a cluster's nodes are neither ordered nor sure (`connectAuthorization` holds none there).
    if (options.subscriber instanceof Cluster)
      throw new Error("leased ZedTokens need one Redis server, not a cluster");
    this.redis = withLeaseCommands(options.redis);
    this.subscriber = options.subscriber;
    this.leaseMs = options.leaseMs;
    this.recentWriteMs = options.recentWriteMs;
    this.ttlMs = options.ttlMs;
    this.session = options.session;
    this.clock = options.clock ?? systemClock;
    this.logger = options.logger;
    this.hooks = options.hooks ?? {};
  }

  /** Subscribes and renews from now on; resolves once the lease first holds, or after `readyTimeoutMs`. */
  async start(readyTimeoutMs = 10_000): Promise<void> {
    this.feed = followChannel(this.subscriber, TOKEN_WRITES_CHANNEL, {
      onMessage: (message) => {
        if (this.hooks.beforeApply) this.applying = this.applying.then(() => this.told(message, true));
        else void this.told(message, false);
      },
      onLive: () => void this.renew(),
      onLost: () => this.lost(),
      onRefused: (err) => this.logger?.warn({ err: err.message }, "leased ZedTokens: subscribe failed"),
    });
    const feed = this.feed;
    this.timer = setInterval(
      () => {
        // An error that did not close the connection left it unsubscribed here: subscribe again.
        feed.resubscribe();
        void this.renew();
      },
      Math.max(1, Math.floor(this.leaseMs / RENEWALS_PER_LEASE)),
    );
    this.timer.unref();
    const deadline = performance.now() + readyTimeoutMs;
    while (!this.holds() && performance.now() < deadline) await sleep(5);
  }

  /** Stops renewing and gives the lease back, so writers no longer wait for this process. */
  async close(): Promise<void> {
    clearInterval(this.timer);
    this.closed = true;
    this.lost();
    await this.redis.zrem(TOKEN_LEASES_KEY, this.id).catch(() => undefined);
  }

  /** Whether tokens kept here may be answered now. */
  holds(): boolean {
    return this.feed?.isLive() === true && performance.now() < this.validUntil;
  }

  /** The last write of `resourceKey` as kept here, for `session`; none: ask Redis. */
  lookup(resourceKey: string, session: number): LastWrite | undefined {
    if (!this.holds()) return undefined;
    const entry = this.entries.get(resourceKey);
    if (!entry || entry.session !== session) return undefined;
    const now = this.clock.now();
    if (now >= entry.expiresAt) {
      this.entries.delete(resourceKey);
      return undefined;
    }
    return { ...(entry.token ? { token: entry.token } : {}), recent: now < entry.recentUntil, session };
  }

  /** Taken before a read of Redis, handed to `keep` after it. */
  mark(): number {
    return this.generation;
  }

  /** Keeps what a read of Redis said, unless a write was told or the subscription lost since `mark`. */
  keep(resourceKey: string, mark: number, read: TokenRead): void {
    if (mark !== this.generation || !this.holds()) return;
    const now = this.clock.now();
    this.entries.set(resourceKey, {
      token: read.token || undefined,
      recentUntil: now + Math.max(0, read.recentLeftMs),
      expiresAt: read.leftMs < 0 ? Number.POSITIVE_INFINITY : now + read.leftMs,
      session: read.session,
    });
  }

  private async told(message: string, hooked: boolean): Promise<void> {
    if (this.closed) return;
    const [kind, first, second, third] = message.split("\u0001");
    if (kind === "r") {
      if (first === this.id) this.renewed(Number(second));
      return;
    }
    if (kind !== "w" || first === undefined || second === undefined || third === undefined) return;
    if (hooked) await this.hooks.beforeApply?.(second);
    this.generation++;
    if (third === "\u0000") this.entries.delete(second);
    else {
      const now = this.clock.now();
      this.entries.set(second, {
        token: third || undefined,
        recentUntil: now + this.recentWriteMs,
        expiresAt: now + this.ttlMs,
        session: this.session(),
      });
    }
    await this.redis.zedTokenAck(ackKey(first), this.id).catch((err: Error) => {
      // Its writer waits for this lease to lapse instead.
      this.logger?.warn({ err: err.message }, "leased ZedTokens: could not acknowledge a write");
    });
  }

  private async renew(): Promise<void> {
    if (!this.feed?.isLive() || this.closed) return;
    const renewal = ++this.renewal;
    this.sent.set(renewal, performance.now());
    try {
      await this.redis.zedTokenRenew(
        TOKEN_LEASES_KEY,
        this.id,
        this.leaseMs,
        TOKEN_WRITES_CHANNEL,
        ["r", this.id, String(renewal)].join("\u0001"),
      );
    } catch (err) {
      this.sent.delete(renewal);
      this.logger?.warn({ err: (err as Error).message }, "leased ZedTokens: could not renew the lease");
    }
  }

  /** A renewal came back on the channel: the lease holds from when it was sent. */
  private renewed(renewal: number): void {
    const sentAt = this.sent.get(renewal);
    if (sentAt === undefined) return;
    for (const earlier of this.sent.keys()) if (earlier <= renewal) this.sent.delete(earlier);
    this.validUntil = Math.max(this.validUntil, sentAt + this.leaseMs - leaseMargin(this.leaseMs));
  }

  private lost(): void {
    this.validUntil = 0;
    this.sent.clear();
    this.generation++;
    this.entries.clear();
  }
}
