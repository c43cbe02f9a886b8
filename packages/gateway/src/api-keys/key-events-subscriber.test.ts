import type { Socket } from "node:net";
import type { RedisClient } from "@gw/core/redis";
import { capturingLogger, startTestRedis, type TestRedis, testRedisClient } from "@gw/test-kit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CachedApiKeyLookup, createKeyEventsSubscriber } from "./lookup.ts";
import { ApiKeyStore } from "./store.ts";

describe("the API-key change feed's connection", () => {
  let server: TestRedis;
  let redis: RedisClient;
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
    const lookup = new CachedApiKeyLookup({
      store: new ApiKeyStore(redis),
      subscriber,
      ttlMs: 60_000,
      staleIfErrorMs: 0,
      logger,
    });
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
});
