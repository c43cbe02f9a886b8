import { randomBytes } from "node:crypto";
import {
  connectAuthorization,
  RedisConsistencyTokens,
  TOKEN_LEASES_KEY,
  TokenLeaseHolder,
  type TokenLeaseHooks,
} from "@gw/core/authz";
import { type Clock, systemClock } from "@gw/core/clock";
import type { RedisClient } from "@gw/core/redis";
import {
  capturingLogger,
  startTestRedis,
  startTestRedisCluster,
  type TestRedisStore,
  testRedisClient,
} from "@gw/test-kit";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";

/** The recent window of these stores: short, so a store trusts Redis soon after it connects. */
const RECENT_MS = 30;

/**
 * Real time until `stop`, then standing still: a holder on it answers a write it applies after `stop` as
 * recent however long the machine takes before the holder is asked (30 ms once passed on a loaded one).
 */
function stoppableClock(): { clock: Clock; stop: () => void } {
  let stoppedAt: number | undefined;
  return {
    clock: { ...systemClock, now: () => stoppedAt ?? systemClock.now() },
    stop: () => {
      stoppedAt = systemClock.now();
    },
  };
}
const TTL_MS = 3_600_000;

/** A replica: its store of tokens and, when it holds a lease, the holder. */
interface Replica {
  redis: RedisClient;
  tokens: RedisConsistencyTokens;
  holder?: TokenLeaseHolder;
}

describe("leased ZedTokens", () => {
  let server: TestRedisStore;
  const opened: RedisClient[] = [];
  const holders: TokenLeaseHolder[] = [];

  beforeAll(async () => {
    server = await startTestRedis();
  });
  afterEach(async () => {
    await Promise.all(holders.splice(0).map((h) => h.close()));
    for (const redis of opened.splice(0)) redis.disconnect();
  });
  afterAll(async () => {
    await server?.stop();
  });

  const client = () => {
    const redis = testRedisClient(server.url);
    opened.push(redis);
    return redis;
  };

  /** A store without a lease: it writes leased tokens as any process does, and reads Redis. */
  const writer = (): Replica => {
    const redis = client();
    return { redis, tokens: new RedisConsistencyTokens(redis, RECENT_MS, undefined, TTL_MS) };
  };

  /** A store holding a lease of `leaseMs`, started; on `clock`, real time by default. */
  const holding = async (
    leaseMs: number,
    hooks?: TokenLeaseHooks,
    clock?: Clock,
  ): Promise<Required<Replica>> => {
    const redis = client();
    const tokens = new RedisConsistencyTokens(redis, RECENT_MS, clock, TTL_MS);
    const holder = new TokenLeaseHolder({
      redis,
      subscriber: client(),
      leaseMs,
      ...tokens.leaseSettings,
      hooks,
    });
    tokens.holdLeases(holder);
    holders.push(holder);
    await holder.start();
    expect(holder.holds()).toBe(true);
    return { redis, tokens, holder };
  };

  const serverKey = () => `mcp_server:org_${randomBytes(4).toString("hex")}/mcp_1`;

  /** How many times `run` read a token from Redis through `replica`'s client. */
  async function readsDuring(replica: Replica, run: () => Promise<unknown>): Promise<number> {
    const scripted = replica.redis as unknown as { zedTokenOf: (...args: unknown[]) => Promise<unknown> };
    const original = scripted.zedTokenOf;
    let reads = 0;
    scripted.zedTokenOf = (...args) => {
      reads++;
      return original.apply(replica.redis, args);
    };
    try {
      await run();
    } finally {
      scripted.zedTokenOf = original;
    }
    return reads;
  }

  /** Reads `key` until the replica answers it from memory (once its connection is trusted), then checks it reads nothing. */
  async function kept(replica: Replica, key: string): Promise<string | undefined> {
    await vi.waitFor(async () => {
      await replica.tokens.get(key);
      expect(await readsDuring(replica, () => replica.tokens.get(key))).toBe(0);
    });
    return (await replica.tokens.get(key)).token;
  }

  /** A holder (`holding`'s arguments) that keeps `t1`, the token a writer wrote for a fresh server. */
  async function keptAfterAWrite(...args: Parameters<typeof holding>) {
    const a = await holding(...args);
    const b = writer();
    const key = serverKey();
    await b.tokens.set(key, "t1");
    expect(await kept(a, key)).toBe("t1");
    return { a, b, key };
  }

  it("a holder answers an MCP server's token from memory once read, and still reads other resources' tokens", async () => {
    const { a, b, key } = await keptAfterAWrite(5_000);
    // Not leased: a stored response's token is read on every check.
    const response = `response:${key.slice("mcp_server:".length)}`;
    await b.tokens.set(response, "r1");
    await a.tokens.get(response);
    await a.tokens.get(response);
    expect(await readsDuring(a, () => a.tokens.get(response))).toBe(1);
  });

  it("a write returns only once every holder has applied it; until then the holder may answer the token before", async () => {
    const arrived = Promise.withResolvers<void>();
    const released = Promise.withResolvers<void>();
    let hold = false;
    const { clock, stop } = stoppableClock();
    const { a, b, key } = await keptAfterAWrite(
      60_000,
      {
        beforeApply: async () => {
          if (!hold) return;
          arrived.resolve();
          await released.promise;
        },
      },
      clock,
    );

    hold = true;
    stop();
    let returned = false;
    const write = b.tokens.set(key, "t2").then(() => {
      returned = true;
    });
    await arrived.promise;
    // Held at the holder: the write has not returned, and the holder still answers the token before it.
    expect((await a.tokens.get(key)).token).toBe("t1");
    expect(returned).toBe(false);
    released.resolve();
    await write;
    // Once it has returned, the holder answers the new token, from memory, recent.
    const after = await a.tokens.get(key);
    expect(after).toMatchObject({ token: "t2", recent: true });
    expect(await readsDuring(a, () => a.tokens.get(key))).toBe(0);
  });

  it("a holder that stops hearing the channel stops answering from memory, and a writer waits no longer than its lease", async () => {
    const never = Promise.withResolvers<void>();
    let hold = false;
    const { a, b, key } = await keptAfterAWrite(400, {
      beforeApply: () => (hold ? never.promise : undefined),
    });

    // The write is never applied at a: its renewals queue behind it, so its lease lapses, and then the write returns.
    hold = true;
    await b.tokens.set(key, "t2");
    expect(a.holder.holds()).toBe(false);
    expect((await a.tokens.get(key)).token).toBe("t2");
    never.resolve();
  });

  it("a read of Redis that a told write overtook is not kept", async () => {
    const a = await holding(5_000);
    const b = writer();
    const key = serverKey();
    const mark = a.holder.mark();
    // What a read sent before the write said, arriving after the write was told and applied.
    await b.tokens.set(key, "t2");
    a.holder.keep(key, mark, { token: "t1", leftMs: TTL_MS, recentLeftMs: 0, session: 0 });
    expect(await kept(a, key)).toBe("t2");
  });

  it("everything kept is dropped when the subscription is lost: a write made meanwhile is read from Redis", async () => {
    const { a, b, key } = await keptAfterAWrite(5_000);
    let lost = false;
    (a.holder as unknown as { subscriber: RedisClient }).subscriber.once("close", () => {
      lost = true;
    });
    await b.redis.call("CLIENT", "KILL", "TYPE", "pubsub");
    await vi.waitFor(() => expect(lost).toBe(true));
    // Written behind the channel's back, as any write while the subscription was down.
    await b.redis.set(`gw:zedtoken:{${key}}`, "t2", "PX", TTL_MS);
    await vi.waitFor(() => expect(a.holder.holds()).toBe(true));
    expect(await kept(a, key)).toBe("t2");
  });

  it("a holder that stops gives its lease back: writers no longer wait for it", async () => {
    const a = await holding(60_000);
    const b = writer();
    expect(await b.redis.zscore(TOKEN_LEASES_KEY, a.holder.id)).not.toBeNull();
    await a.holder.close();
    expect(await b.redis.zscore(TOKEN_LEASES_KEY, a.holder.id)).toBeNull();
    expect(a.holder.holds()).toBe(false);
    // With a's lease of a minute still in Redis this would wait a minute (the test's timeout is less).
    await b.tokens.set(serverKey(), "t1");
  });

  it("a holder with a short lease never shortens the life of the leases of others", async () => {
    await holding(60_000);
    await holding(300);
    const b = writer();
    // The short lease renewed last; the set still lives as long as the long one needs (four leases).
    expect(await b.redis.pttl(TOKEN_LEASES_KEY)).toBeGreaterThan(200_000);
  });

  it("a deleted or dropped server's token is told too", async () => {
    const { clock, stop } = stoppableClock();
    const { a, b, key } = await keptAfterAWrite(5_000, undefined, clock);
    stop();
    await b.tokens.forget(key);
    expect(await a.tokens.get(key)).toMatchObject({ recent: true });
    expect((await a.tokens.get(key)).token).toBeUndefined();
    await b.tokens.set(key, "t3");
    expect((await a.tokens.get(key)).token).toBe("t3");
    await b.tokens.drop(key);
    expect((await a.tokens.get(key)).token).toBeUndefined();
    expect(await b.redis.exists(`gw:zedtoken:{${key}}`)).toBe(0);
  });
});

/** What `connectAuthorization` reads of the variables, for a store with no SpiceDB behind it. */
const spicedbConfig = {
  SPICEDB_LOCAL_PORT: 9,
  SPICEDB_DEADLINE_MS: 100,
  SPICEDB_FULLY_CONSISTENT_AFTER_WRITE_MS: RECENT_MS,
  DECISION_CACHE_SIZE: 0,
  DECISION_CACHE_MAX_AGE_MS: 0,
  SPICEDB_ZEDTOKEN_TTL: TTL_MS,
};

describe("leased ZedTokens on Redis Cluster", () => {
  let cluster: TestRedisStore;
  beforeAll(async () => {
    cluster = await startTestRedisCluster();
  }, 60_000);
  afterAll(async () => {
    await cluster?.stop();
  });

  it("holds no lease (messages between nodes are neither ordered nor sure): checks read Redis, and writes go through", async () => {
    const redis = testRedisClient(cluster.url);
    const subscriber = testRedisClient(cluster.url);
    const { logger, lines } = capturingLogger("info");
    const { tokens, leases, spicedb } = connectAuthorization(
      {
        ...spicedbConfig,
        spicedb: { endpoint: "127.0.0.1:9", presharedKey: "k", insecure: true, deadlineMs: 100 },
      },
      redis,
      logger,
      { leases: { subscriber, leaseMs: 2_000 } },
    );
    try {
      expect(leases).toBeUndefined();
      expect(lines.join("\n")).toContain("not held on Redis Cluster");
      expect(
        () =>
          new TokenLeaseHolder({
            redis,
            subscriber,
            leaseMs: 2_000,
            recentWriteMs: 1,
            ttlMs: TTL_MS,
            session: () => 0,
          }),
      ).toThrow(/cluster/);
      const key = `mcp_server:org_${randomBytes(4).toString("hex")}/mcp_1`;
      await tokens.set(key, "t1");
      expect((await tokens.get(key))?.token).toBe("t1");
    } finally {
      spicedb.close();
      redis.disconnect();
      subscriber.disconnect();
    }
  });
});
