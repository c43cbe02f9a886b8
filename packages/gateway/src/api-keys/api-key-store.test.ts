import { AppError } from "@gw/core/errors";
import type { RedisClient } from "@gw/core/redis";
import { describeEachTopology, useTestRedis } from "@gw/test-kit";
import { describe, expect, it } from "vitest";
import { freshOrg } from "../../test/harness.ts";
import { generateSecret } from "./secret.ts";
import { ApiKeyStore, DuplicateSecretError, MAX_CHANGE_ATTEMPTS } from "./store.ts";

/** `redis`, with `wrap` standing in for one of its commands. */
function intercept<C extends "get" | "set">(
  redis: RedisClient,
  command: C,
  wrap: (original: RedisClient[C]) => RedisClient[C],
): RedisClient {
  return new Proxy(redis, {
    get(target, property) {
      if (property === command) return wrap(target[command].bind(target) as RedisClient[C]);
      const value = Reflect.get(target, property, target);
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
}

describeEachTopology("the API-key store on %s Redis", (topology) => {
  const test = useTestRedis(topology);

  /**
   * The store's Redis, with `between` run after every GET returns and before
   * the caller goes on: the window between a compare-and-set's read and its write.
   */
  const withChangeAfterRead = (between: () => Promise<unknown>) =>
    intercept(
      test.redis,
      "get",
      (get) =>
        (async (key: string) => {
          const value = await get(key);
          await between();
          return value;
        }) as RedisClient["get"],
    );

  it("creates a key that is found by its secret, its id and its organization", async () => {
    const store = new ApiKeyStore(test.redis);
    const org = freshOrg();
    const { record } = await store.create({ org, owner: "alice" });
    expect(await store.findByHash(record.hash)).toEqual(record);
    expect(await store.get(record.id)).toEqual(record);
    expect(await store.listByOrg(org)).toEqual([record]);
  });

  it("stores one record for one secret when two writers create it at once: the loser's is gone", async () => {
    const secret = generateSecret();
    const org = freshOrg();
    // Both writers hold back their claim of the secret's hash until both records are written.
    let written = 0;
    let release!: () => void;
    const bothWritten = new Promise<void>((resolve) => {
      release = resolve;
    });
    const racing = new ApiKeyStore(
      intercept(
        test.redis,
        "set",
        (set) =>
          (async (...args: Parameters<RedisClient["set"]>) => {
            if (String(args[0]).startsWith("gw:apikey-hash:")) {
              if (++written === 2) release();
              await bothWritten;
            }
            return set(...args);
          }) as RedisClient["set"],
      ),
    );
    const outcomes = await Promise.allSettled([
      racing.create({ org, owner: "alice" }, secret),
      racing.create({ org, owner: "bob" }, secret),
    ]);
    const won = outcomes.flatMap((o) => (o.status === "fulfilled" ? [o.value.record] : []));
    const lost = outcomes.flatMap((o) => (o.status === "rejected" ? [o.reason] : []));
    expect(won).toHaveLength(1);
    expect(lost).toEqual([expect.any(DuplicateSecretError)]);
    const store = new ApiKeyStore(test.redis);
    expect(await store.findByHash(won[0]!.hash)).toEqual(won[0]);
    expect(await store.listByOrg(org)).toEqual([won[0]]);
  });

  describe("changing a key another writer is changing too", () => {
    it("applies a change that lost the race again, to the newer record: both changes stay", async () => {
      const store = new ApiKeyStore(test.redis);
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
      const store = new ApiKeyStore(test.redis);
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
});
