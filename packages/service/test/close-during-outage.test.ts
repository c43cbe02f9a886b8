import { randomBytes } from "node:crypto";
import { loadConfig } from "@gw/core/config";
import { createLogger } from "@gw/core/logger";
import { createTestDatabase, spicedbEnv, startTestRedis, startTestSpiceDB } from "@gw/test-kit";
import { afterAll, describe, expect, it } from "vitest";
import { serviceConfigSchema } from "../src/config.ts";
import { startService } from "../src/server.ts";

const redis = await startTestRedis();
const spicedb = await startTestSpiceDB();
const database = await createTestDatabase();
afterAll(async () => {
  await Promise.all([redis.stop(), spicedb.close(), database.drop()]);
});

describe("the service, stopping", () => {
  // Its eval worker's Redis connections are then between reconnection attempts, where ioredis never
  // ends a connection it is asked to close; BullMQ's graceful close used to wait for that forever.
  it("closes while Redis is down", async () => {
    const service = await startService(
      loadConfig(serviceConfigSchema, {
        PORT: "0",
        REDIS_URL: redis.url,
        DATABASE_URL: database.url,
        INTERNAL_ASSERTION_SECRET: randomBytes(32).toString("hex"),
        EVAL_WORKER_CONCURRENCY: "2",
        ...spicedbEnv(spicedb),
      }),
      createLogger("service", "silent"),
    );
    await redis.halt();
    try {
      await expect(service.close()).resolves.toBeUndefined();
    } finally {
      await redis.restart();
    }
  });
});
