import { randomBytes } from "node:crypto";
import {
  DEFAULT_TOKEN_TTL_MS,
  RedisConsistencyTokens,
  ResourceAuthorization,
  SpiceDBClient,
  scopedId,
  v1,
} from "@gw/core/authz";
import { ManualClock } from "@gw/core/clock";
import type { Principal } from "@gw/core/principal";
import { createRedis, type RedisClient } from "@gw/core/redis";
import { type RunningSpiceDBLocal, startSpiceDBLocal } from "@gw/spicedb-local";
import { REDIS_TOPOLOGIES, scanKeys, type TestRedisStore, testRedisClient, useTestRedis } from "@gw/test-kit";
import { pastRecentWindow } from "@gw/test-kit/zedtokens";
import { Cluster } from "ioredis";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";

/** What consistency each CheckPermission asked SpiceDB for, as the server received it. */
const asked: string[] = [];
/** The same for each LookupResources. */
const lookedUp: string[] = [];

const requirementOf = (consistency: v1.Consistency | undefined) => {
  const requirement = consistency?.requirement;
  return requirement?.oneofKind === "atLeastAsFresh"
    ? `atLeastAsFresh:${requirement.atLeastAsFresh.token}`
    : `${requirement?.oneofKind}`;
};
let spicedb: RunningSpiceDBLocal;
let client: SpiceDBClient;

beforeAll(async () => {
  spicedb = await startSpiceDBLocal({
    host: "127.0.0.1",
    port: 0,
    presharedKey: "k",
    schemaFile: new URL("../../../spicedb/schema.zed", import.meta.url).pathname,
    observe: (path, request) => {
      if (path.endsWith("/CheckPermission"))
        asked.push(requirementOf(v1.CheckPermissionRequest.fromBinary(request).consistency));
      if (path.endsWith("/LookupResources"))
        lookedUp.push(requirementOf(v1.LookupResourcesRequest.fromBinary(request).consistency));
    },
  });
  client = new SpiceDBClient({
    endpoint: spicedb.endpoint,
    presharedKey: "k",
    insecure: true,
    deadlineMs: 2_000,
  });
});
afterAll(async () => {
  client.close();
  await spicedb.close();
});

const alice: Principal = {
  org: "acme",
  user: "alice",
  keyId: "k",
  permissions: [],
  credential: "api_key",
  onBehalfOf: false,
};

/**
 * Whether `redis` is connected and answers: a Cluster client goes through a
 * few connections to its nodes after an outage (each one made is a break the
 * token store counts) before it is ready on every node it knows.
 */
async function connected(redis: RedisClient): Promise<void> {
  if (!(redis instanceof Cluster)) {
    await redis.ping();
    return;
  }
  expect(redis.status).toBe("ready");
  const nodes = redis.nodes("all");
  expect(nodes.length).toBeGreaterThan(0);
  await Promise.all(nodes.map((node) => node.ping()));
}

/** Makes every master of `server` write its data to disk, so a restart finds it again. */
async function saveAll(server: TestRedisStore): Promise<void> {
  for (const node of server.nodes) {
    const redis = createRedis(node.url, { connectionName: "test-save" });
    try {
      await redis.save();
    } finally {
      redis.disconnect();
    }
  }
}

describe.each(REDIS_TOPOLOGIES)("the consistency a check asks for, on %s Redis", (topology) => {
  const store = useTestRedis(topology);

  it("holds one key of at most 200 bytes per written resource, for the token's TTL only", async () => {
    const { redis } = store;
    const tokens = new RedisConsistencyTokens(redis, 100, new ManualClock(), 400);
    const authz = new ResourceAuthorization(client, tokens);
    // A stored response as the service names it, in an organization as the gateway names it.
    const principal = { ...alice, org: `org_${randomBytes(8).toString("hex")}` };
    const resource = { type: "response" as const, id: `resp_${randomBytes(16).toString("hex")}` };
    await authz.createOwnership(principal, resource, { expiresAt: new Date(Date.now() + 30 * 86_400_000) });
    const tokenAt = `gw:zedtoken:{response:${scopedId(principal.org, resource.id)}}`;
    expect(await scanKeys(redis, `${tokenAt}*`)).toEqual([tokenAt]);
    const bytes = Number(await redis.call("MEMORY", "USAGE", tokenAt, "SAMPLES", "0"));
    expect(bytes).toBeGreaterThan(0);
    expect(bytes).toBeLessThanOrEqual(200);
    // Expiry bookkeeping lives with the content, not here: once the TTL has passed, nothing is left.
    await vi.waitFor(async () => expect(await scanKeys(redis, `${tokenAt}*`)).toEqual([]), {
      timeout: 5_000,
      interval: 50,
    });
  });

  it("is cheap for a resource never written, fully consistent right after a write, and the write's token after that", async () => {
    const { redis } = store;
    const clock = new ManualClock();
    const tokens = new RedisConsistencyTokens(redis, 2_000, clock);
    const authz = new ResourceAuthorization(client, tokens);
    const resource = { type: "conversation" as const, id: `conv_${Date.now()}` };

    // A process trusts what Redis says once Redis has answered it for the window: it cannot know what Redis lost before.
    await authz.check(alice, resource, "reader");
    expect(asked.at(-1)).toBe("fullyConsistent");
    clock.advance(2_000);
    await authz.check(alice, resource, "reader");
    expect(asked.at(-1)).toBe("minimizeLatency");

    await authz.createOwnership(alice, resource);
    const written = await tokens.get(`conversation:acme/${resource.id}`);
    expect(written).toEqual({ token: expect.any(String), recent: true, session: expect.any(Number) });
    expect(await authz.check(alice, resource, "owner")).toBe(true);
    expect(asked.at(-1)).toBe("fullyConsistent");

    // "Recent" is what Redis says of the key's own expiry, not a time any replica compares with its own clock:
    // one key, kept for the token's TTL, recent while more than the TTL less the window is left.
    const tokenAt = `gw:zedtoken:{conversation:acme/${resource.id}}`;
    expect(await scanKeys(redis, `${tokenAt}*`)).toEqual([tokenAt]);
    const ttl = await redis.pttl(tokenAt);
    expect(ttl).toBeGreaterThan(DEFAULT_TOKEN_TTL_MS - 2_000);
    expect(ttl).toBeLessThanOrEqual(DEFAULT_TOKEN_TTL_MS);
    await redis.pexpire(tokenAt, DEFAULT_TOKEN_TTL_MS - 2_000);
    expect(await authz.check(alice, resource, "owner")).toBe(true);
    expect(asked.at(-1)).toBe(`atLeastAsFresh:${written!.token}`);
  });

  it.each(["kept", "lost"] as const)(
    "is fully consistent on every replica, for checks and lookups, once Redis is back from an outage in which it %s its data, until it has answered for the window",
    async (outcome) => {
      const clock = new ManualClock();
      // Two replicas, each with its own connection to Redis; A revokes during the outage, B does nothing then.
      const [redisA, redisB] = [testRedisClient(store.server.url), testRedisClient(store.server.url)];
      const a = new ResourceAuthorization(client, new RedisConsistencyTokens(redisA, 2_000, clock));
      const b = new ResourceAuthorization(client, new RedisConsistencyTokens(redisB, 2_000, clock));
      const org = `org-${randomBytes(4).toString("hex")}`;
      const [owner, bob] = [
        { ...alice, org },
        { ...alice, org, user: "bob" },
      ];
      const resource = { type: "file" as const, id: "file_outage" };
      const role = { ...resource, userId: "bob", role: "reader" as const };
      try {
        await a.createOwnership(owner, resource);
        await a.grant(owner, role);
        const tokenAt = `gw:zedtoken:{file:${scopedId(org, resource.id)}}`;
        const granted = { token: await store.redis.get(tokenAt) };
        for (const replica of [a, b]) expect(await replica.check(bob, resource, "reader")).toBe(true);
        // Both have had Redis for the window; the grant's "recent" markers are gone.
        clock.advance(2_000);
        await pastRecentWindow(store.redis, tokenAt, `gw:zedtoken:{organization:${org}}`);
        await b.check(bob, resource, "reader");
        expect(asked.at(-1)).toBe(`atLeastAsFresh:${granted.token}`);
        await b.lookup(bob, "file", "reader", { limit: 10 });
        expect(lookedUp.at(-1)).toBe(`atLeastAsFresh:${granted.token}`);

        if (outcome === "kept") await saveAll(store.server);
        await store.server.halt();
        try {
          // Acknowledged, though its token could not be kept.
          expect(await a.revoke(owner, role)).toEqual(expect.any(String));
        } finally {
          await store.server.restart();
        }
        await vi.waitFor(() => Promise.all([connected(redisA), connected(redisB)]), {
          timeout: 15_000,
          interval: 50,
        });

        // The token there is the grant's (kept) or none (lost), both older than the revoke: neither is used.
        for (const replica of [b, a]) {
          expect(await replica.check(bob, resource, "reader")).toBe(false);
          expect(asked.at(-1)).toBe("fullyConsistent");
          expect((await replica.lookup(bob, "file", "reader", { limit: 10 })).resourceIds).toEqual([]);
          expect(lookedUp.at(-1)).toBe("fullyConsistent");
        }
        // Until Redis has answered for the window, by which time SpiceDB's snapshots hold the revoke.
        clock.advance(1_999);
        await b.check(bob, resource, "reader");
        expect(asked.at(-1)).toBe("fullyConsistent");
        clock.advance(1);
        await b.check(bob, resource, "reader");
        // Then as Redis says: the grant's token (kept) or none (lost), unless the revoke's write to Redis, which
        // timed out, still reached it once it was back (a Cluster client keeps commands while the cluster is down).
        const [token, left] = await Promise.all([store.redis.get(tokenAt), store.redis.pttl(tokenAt)]);
        expect(asked.at(-1)).toBe(
          left > DEFAULT_TOKEN_TTL_MS - 2_000
            ? "fullyConsistent"
            : token
              ? `atLeastAsFresh:${token}`
              : "minimizeLatency",
        );
        if (store.server.topology === "single") expect(token).toBe(outcome === "kept" ? granted.token : null);
      } finally {
        redisA.disconnect();
        redisB.disconnect();
      }
    },
  );

  it("is fully consistent when the last write cannot be known (Redis trouble)", async () => {
    // A real client to a Redis that is not there: every command fails at once.
    const gone = createRedis("redis://127.0.0.1:1", {
      connectionName: "gone",
      extra: { lazyConnect: true, enableOfflineQueue: false, retryStrategy: () => null },
    });
    gone.on("error", () => undefined);
    const authz = new ResourceAuthorization(client, new RedisConsistencyTokens(gone, 0));
    await authz.check(alice, { type: "file", id: "file_x" }, "reader");
    expect(asked.at(-1)).toBe("fullyConsistent");
    gone.disconnect();
  });
});
