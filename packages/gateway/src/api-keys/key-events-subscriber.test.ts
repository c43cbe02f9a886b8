import type { Socket } from "node:net";
import type { Logger } from "@gw/core/logger";
import { McpReadCache } from "@gw/core/mcp";
import type { RedisClient } from "@gw/core/redis";
import { capturingLogger, startTestRedis, type TestRedis, testRedisClient } from "@gw/test-kit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CachedApiKeyLookup, createKeyEventsSubscriber } from "./lookup.ts";
import { ApiKeyStore } from "./store.ts";

describe("the API-key change feed's connection", () => {
  let server: TestRedis;
  let redis: RedisClient;
  /** A key lookup whose change feed is `subscriber`. */
  const lookupOn = (subscriber: RedisClient, logger: Logger) =>
    new CachedApiKeyLookup({
      store: new ApiKeyStore(redis),
      subscriber,
      ttlMs: 60_000,
      staleIfErrorMs: 0,
      logger,
    });
  beforeAll(async () => {
    server = await startTestRedis();
    redis = testRedisClient(server.url);
  });
  afterAll(async () => {
    redis?.disconnect();
    await server?.stop();
  });

  it("closed right after a reconnect, before Redis answers its SUBSCRIBE, leaves no unhandled rejection and logs the failure", async () => {
    const { logger, lines } = capturingLogger("warn");
    const subscriber = createKeyEventsSubscriber(server.url, { logger });
    const lookup = lookupOn(subscriber, logger);
    await lookup.start();

    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown) => unhandled.push(reason);
    process.on("unhandledRejection", onUnhandled);
    try {
      // Once it is ready again, what it sent on becoming ready is in flight: close it then (as a
      // shutdown would), and drop the socket so that no answer can arrive before the close.
      const ended = new Promise<void>((resolve) => {
        subscriber.once("ready", () => {
          subscriber.once("end", () => resolve());
          subscriber.disconnect();
          (subscriber as unknown as { stream: Socket }).stream.destroy();
        });
      });
      await redis.client("KILL", "TYPE", "pubsub");
      await ended;
      // Rejections nobody handled are reported once the tick that made them has run.
      await new Promise((resolve) => setImmediate(resolve));
      expect(unhandled).toEqual([]);
      expect(lines.join("")).toContain("API key change feed: subscribe failed");
    } finally {
      process.off("unhandledRejection", onUnhandled);
    }
  });

  it("a SUBSCRIBE that Redis refuses on a ready connection fails the key lookup's start; the MCP servers' read cache starts without its feed and keeps nothing", async () => {
    // A user that may run every command on every key, and subscribe to no channel.
    await redis.call(
      "ACL",
      "SETUSER",
      "no-channels",
      "on",
      ">no-channels-pw",
      "~*",
      "resetchannels",
      "+@all",
    );
    const url = new URL(server.url);
    url.username = "no-channels";
    url.password = "no-channels-pw";
    const { logger, lines } = capturingLogger("warn");
    const ready = async (client: RedisClient) => {
      if (client.status !== "ready") await new Promise((resolve) => client.once("ready", resolve));
      return client;
    };
    const subscriber = await ready(createKeyEventsSubscriber(url.href, { logger }));
    const mcpSubscriber = await ready(createKeyEventsSubscriber(url.href, { logger }));
    try {
      const lookup = lookupOn(subscriber, logger);
      // Well before the wait for a slow Redis would end.
      await expect(lookup.start(60_000)).rejects.toThrow(/NOPERM/);
      expect(lines.join("")).toContain("API key change feed: subscribe failed");

      const cache = new McpReadCache({ publisher: redis, subscriber: mcpSubscriber, logger });
      await cache.start(60_000);
      expect(lines.join("")).toContain("MCP change feed: subscribe failed");
      let reads = 0;
      const read = async () => ++reads;
      await cache.read("org", "server", "row", read);
      expect(await cache.read("org", "server", "row", read)).toBe(2);
    } finally {
      subscriber.disconnect();
      mcpSubscriber.disconnect();
    }
  });
});
