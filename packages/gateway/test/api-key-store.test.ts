import { AppError, createRedis } from "@gw/core";
import { startTestRedis, type TestRedis } from "@gw/devstack/testing";
import type { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ApiKeyStore, MAX_CHANGE_ATTEMPTS } from "../src/api-keys/store.ts";
import { freshOrg } from "./harness.ts";

let server: TestRedis;
let redis: Redis;
beforeAll(async () => {
  server = await startTestRedis();
  redis = createRedis(server.url, { connectionName: "test" });
});
afterAll(async () => {
  redis.disconnect();
  await server.stop();
});

/**
 * The store's Redis, with `between` run after every GET returns and before
 * the caller goes on: the window between a compare-and-set's read and its write.
 */
function withChangeAfterRead(between: () => Promise<unknown>): Redis {
  return new Proxy(redis, {
    get(target, property) {
      if (property === "get") {
        return async (key: string) => {
          const value = await target.get(key);
          await between();
          return value;
        };
      }
      const value = Reflect.get(target, property, target);
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
}

describe("changing a key another writer is changing too", () => {
  it("applies a change that lost the race again, to the newer record: both changes stay", async () => {
    const store = new ApiKeyStore(redis);
    const { record } = await store.create({ org: freshOrg(), owner: "alice" });
    let raced = false;
    const racing = new ApiKeyStore(
      withChangeAfterRead(async () => {
        if (raced) return;
        raced = true;
        await store.revoke(record.id);
      }),
    );
    expect(await racing.update(record.id, { name: "renamed" })).toMatchObject({
      name: "renamed",
      status: "revoked",
    });
    expect(await store.get(record.id)).toMatchObject({ name: "renamed", status: "revoked" });
  });

  it("gives up with a catalogue conflict (409) when another writer wins every attempt", async () => {
    const store = new ApiKeyStore(redis);
    const { record } = await store.create({ org: freshOrg(), owner: "alice", permissions: ["usage:read"] });
    let others = 0;
    const racing = new ApiKeyStore(
      withChangeAfterRead(() => store.update(record.id, { name: `other-${++others}` })),
    );
    const error = await racing
      .update(record.id, { permissions: ["responses:read"] })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(AppError);
    expect(error).toMatchObject({ code: "conflict", status: 409 });
    expect((error as Error).message).toBe(`API key ${record.id} is being changed concurrently; try again`);
    expect(others).toBe(MAX_CHANGE_ATTEMPTS);
    expect(await store.get(record.id)).toMatchObject({
      name: `other-${MAX_CHANGE_ATTEMPTS}`,
      permissions: ["usage:read"],
    });
  });
});
