import { McpReadCache } from "@gw/core/mcp";
import { apiKeyRecordKey } from "@gw/core/on-behalf-of";
import { DEFAULT_PERMISSIONS } from "@gw/core/permissions";
import { followChannel, type RedisClient } from "@gw/core/redis";
import { capturingLogger, startTestRedisCluster, type TestRedisStore, testRedisClient } from "@gw/test-kit";
import { Cluster } from "ioredis";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { CachedApiKeyLookup, createKeyEventsSubscriber } from "./lookup.ts";
import { ApiKeyStore } from "./store.ts";

/**
 * On a Redis Cluster, ioredis moves its subscriber connection to another node when the connection ends
 * (or its node leaves) and subscribes again without a word: a change published meanwhile never reaches
 * this replica. The feed's followers (`followChannel`, core/redis.ts) take each move as a loss.
 */
describe("change feeds on a Redis Cluster (API keys, MCP servers)", () => {
  let cluster: TestRedisStore;
  let redis: RedisClient;
  let subscriber: RedisClient | undefined;
  beforeAll(async () => {
    cluster = await startTestRedisCluster();
    redis = testRedisClient(cluster.url);
  });
  afterAll(async () => {
    subscriber?.disconnect();
    redis?.disconnect();
    await cluster?.stop();
  });

  it("a move of its subscriber to another node drops the cached keys, and the feed is trusted again once subscribed there", async () => {
    const { logger, lines } = capturingLogger("warn");
    subscriber = createKeyEventsSubscriber(cluster.url, { logger });
    const store = new ApiKeyStore(redis);
    const lookup = new CachedApiKeyLookup({ store, subscriber, ttlMs: 600_000, staleIfErrorMs: 0, logger });
    await lookup.start();
    const { record, secret } = await store.create({
      org: "acme",
      owner: "alice",
      permissions: [...DEFAULT_PERMISSIONS],
    });
    expect((await lookup.findBySecret(secret))?.status).toBe("active");

    // A revocation whose message this replica never heard (as one published while its subscription
    // moved): the record changes, nothing is published. The cached copy still answers.
    const revoked = { ...record, status: "revoked", revokedAt: new Date().toISOString() };
    await redis.set(apiKeyRecordKey(record.id), JSON.stringify(revoked));
    expect((await lookup.findBySecret(secret))?.status).toBe("active");

    // Every node drops its pub/sub connections: ioredis picks a node and subscribes again, saying nothing.
    const masters = "nodes" in redis ? redis.nodes("master") : [];
    expect(masters.length).toBe(3);
    await Promise.all(masters.map((node) => node.client("KILL", "TYPE", "pubsub")));
    await vi.waitFor(async () => expect((await lookup.findBySecret(secret))?.status).toBe("revoked"));
    expect(lines.join("")).toContain("API key change feed lost");

    // Subscribed on the new connection: copies are kept again, and a change published now is heard.
    const other = await store.create({ org: "acme", owner: "bob", permissions: [...DEFAULT_PERMISSIONS] });
    await vi.waitFor(async () => {
      await lookup.findBySecret(other.secret);
      // Kept: a read of the record changed without a message still answers the copy.
      await redis.set(
        apiKeyRecordKey(other.record.id),
        JSON.stringify({ ...other.record, name: "changed unheard" }),
      );
      expect((await lookup.findBySecret(other.secret))?.name).not.toBe("changed unheard");
    });
    await store.update(other.record.id, { name: "changed and told" });
    await vi.waitFor(async () =>
      expect((await lookup.findBySecret(other.secret))?.name).toBe("changed and told"),
    );
  });

  it("the MCP servers' read cache keeps nothing across such a move", async () => {
    const mcpSubscriber = createKeyEventsSubscriber(cluster.url, { logger: capturingLogger("warn").logger });
    try {
      const cache = new McpReadCache({ publisher: redis, subscriber: mcpSubscriber });
      await cache.start();
      let reads = 0;
      const read = () => cache.read("acme", "srv_1", "server", async () => ++reads);
      expect(await read()).toBe(1);
      expect(await read()).toBe(1);
      const masters = "nodes" in redis ? redis.nodes("master") : [];
      await Promise.all(masters.map((node) => node.client("KILL", "TYPE", "pubsub")));
      await vi.waitFor(async () => expect(await read()).toBeGreaterThan(1));
    } finally {
      mcpSubscriber.disconnect();
    }
  });

  it("refuses to follow a channel on a Cluster client whose subscriber it cannot watch move (another ioredis)", () => {
    const client = new Cluster([{ host: "127.0.0.1", port: 1 }], { lazyConnect: true });
    const inner = client as unknown as { subscriber: unknown };
    const own = inner.subscriber;
    try {
      inner.subscriber = {};
      const handlers = { onMessage() {}, onLive() {}, onLost() {}, onRefused() {} };
      expect(() => followChannel(client, "gw:apikey-events", handlers)).toThrow(/cannot be trusted/);
    } finally {
      inner.subscriber = own;
      client.disconnect();
    }
  });
});
