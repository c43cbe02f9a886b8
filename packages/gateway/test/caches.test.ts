import { ManualClock } from "@gw/core/clock";
import { createLogger } from "@gw/core/logger";
import { DEFAULT_PERMISSIONS } from "@gw/core/permissions";
import { createRedis, type RedisClient } from "@gw/core/redis";
import { startTestRedis } from "@gw/test-kit";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { CachedApiKeyLookup } from "../src/api-keys/lookup.ts";
import { ApiKeyStore } from "../src/api-keys/store.ts";
import { generateSigningJwk, loadSigningKeys } from "../src/tokens/signing-keys.ts";
import { InvalidToken, TokenService } from "../src/tokens/tokens.ts";

describe("verified gateway tokens", () => {
  const AUDIENCE = "https://gateway.test";
  afterEach(() => vi.useRealTimers());

  async function service() {
    const jwk = await generateSigningJwk();
    return new TokenService(await loadSigningKeys(JSON.stringify({ keys: [jwk] })), AUDIENCE);
  }
  const claims = { sub: "alice", aud: AUDIENCE, org: "acme", keyId: "key_1", permissions: [] };

  it("are verified once, then served from the cache until they expire", async () => {
    const tokens = await service();
    const token = await tokens.sign(claims, 300);
    const once = vi.spyOn(tokens as unknown as { verifyOnce: () => Promise<unknown> }, "verifyOnce");
    for (let i = 0; i < 5; i++) expect((await tokens.verify(token, AUDIENCE)).sub).toBe("alice");
    expect(once).toHaveBeenCalledTimes(1);
    // Another audience is another entry, verified (and refused) on its own.
    await expect(tokens.verify(token, "https://elsewhere.test")).rejects.toBeInstanceOf(InvalidToken);
    expect(once).toHaveBeenCalledTimes(2);
  });

  it("a cached token is refused once its expiry (plus the tolerated skew) has passed", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    const tokens = await service();
    const token = await tokens.sign(claims, 300);
    await tokens.verify(token, AUDIENCE);
    vi.setSystemTime(Date.now() + 300_000 + 29_000);
    expect((await tokens.verify(token, AUDIENCE)).sub).toBe("alice");
    vi.setSystemTime(Date.now() + 2_000);
    await expect(tokens.verify(token, AUDIENCE)).rejects.toMatchObject({ reason: "expired" });
  });
});

describe("API-key lookups", () => {
  let server: Awaited<ReturnType<typeof startTestRedis>>;
  let redis: RedisClient;
  let subscriber: RedisClient;
  let store: ApiKeyStore;
  beforeAll(async () => {
    server = await startTestRedis();
    redis = createRedis(server.url, { connectionName: "cache-test" });
    subscriber = createRedis(server.url, {
      connectionName: "cache-test-sub",
      extra: { commandTimeout: undefined },
    });
    store = new ApiKeyStore(redis);
  });
  afterAll(async () => {
    redis.disconnect();
    subscriber.disconnect();
    await server.stop();
  });

  async function lookup(opts: { store?: ApiKeyStore; staleIfErrorMs?: number; clock?: ManualClock } = {}) {
    const l = new CachedApiKeyLookup({
      store: opts.store ?? store,
      subscriber,
      ttlMs: 60_000,
      staleIfErrorMs: opts.staleIfErrorMs ?? 0,
      logger: createLogger("test", "silent"),
      clock: opts.clock,
    });
    await l.start();
    return l;
  }

  it("that miss the cache at once share one Redis read", async () => {
    const { record, secret } = await store.create({
      org: "o",
      owner: "u",
      permissions: [...DEFAULT_PERMISSIONS],
    });
    const l = await lookup();
    const reads = vi.spyOn(store, "findByHash");
    const found = await Promise.all(Array.from({ length: 20 }, () => l.findBySecret(secret)));
    expect(found.every((f) => f?.id === record.id)).toBe(true);
    expect(reads).toHaveBeenCalledTimes(1);
    reads.mockRestore();
  });

  it("do not join a read that started before a change: a revocation is never answered by an older read", async () => {
    const { record, secret } = await store.create({
      org: "o",
      owner: "u",
      permissions: [...DEFAULT_PERMISSIONS],
    });
    const l = await lookup();
    // The first read is held until released, so the revocation lands while it is in flight.
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    const original = store.findByHash.bind(store);
    const reads = vi.spyOn(store, "findByHash").mockImplementationOnce(async (hash) => {
      const before = await original(hash);
      await held;
      return before;
    });
    const early = l.findBySecret(secret);
    await vi.waitFor(() => expect(reads).toHaveBeenCalledTimes(1));
    await store.revoke(record.id);
    const late = l.findBySecret(secret);
    release();
    expect((await early)?.status).toBe("active"); // it was asked before the revocation
    expect((await late)?.status).toBe("revoked");
    expect(reads).toHaveBeenCalledTimes(2);
    reads.mockRestore();
  });

  it("serve a cached key for ttlMs on the clock, then read it again", async () => {
    const { secret } = await store.create({ org: "o", owner: "u", permissions: [...DEFAULT_PERMISSIONS] });
    const clock = new ManualClock();
    const l = await lookup({ clock });
    const reads = vi.spyOn(store, "findByHash");
    await l.findBySecret(secret);
    clock.advance(59_999);
    await l.findBySecret(secret);
    expect(reads).toHaveBeenCalledTimes(1);
    clock.advance(1);
    await l.findBySecret(secret);
    expect(reads).toHaveBeenCalledTimes(2);
    reads.mockRestore();
  });

  it("while Redis cannot be asked, serve a copy for staleIfErrorMs on the clock, then answer 503", async () => {
    const own = createRedis(server.url, {
      connectionName: "cache-test-outage",
      extra: { enableOfflineQueue: false, maxRetriesPerRequest: 0, retryStrategy: () => null },
    });
    own.on("error", () => {});
    await new Promise((r) => own.once("ready", r));
    const { record, secret } = await store.create({
      org: "o",
      owner: "u",
      permissions: [...DEFAULT_PERMISSIONS],
    });
    const clock = new ManualClock();
    const l = await lookup({ store: new ApiKeyStore(own), staleIfErrorMs: 300_000, clock });
    expect((await l.findBySecret(secret))?.id).toBe(record.id);
    own.disconnect(); // this lookup's Redis is gone
    clock.advance(299_999); // long past ttlMs: Redis is asked, fails, and the copy serves
    expect((await l.findBySecret(secret))?.id).toBe(record.id);
    clock.advance(1);
    await expect(l.findBySecret(secret)).rejects.toMatchObject({ status: 503 });
  });
});
