/**
 * `pnpm bench`: side-by-side measurements on this machine, in one run, as
 * ratios. Nothing here is asserted; numbers depend on the machine's load.
 */

import { createConnection, createServer, type Socket } from "node:net";
import { createLogger, createRedis, DEFAULT_PERMISSIONS, v1 } from "@gw/core";
import { startTestRedis, startTestSpiceDB } from "@gw/devstack/testing";
import { ApiKeyStore } from "@gw/gateway";
import { RateLimiterRedis, RateLimiterUnion } from "rate-limiter-flexible";
import { CachedApiKeyLookup } from "../../packages/gateway/src/api-keys/lookup.ts";
import { MemoryWindows } from "../../packages/gateway/src/rate-limit/memory-windows.ts";
import { RedisWindows } from "../../packages/gateway/src/rate-limit/redis-windows.ts";

/** A TCP relay that holds every chunk for `delayMs` each way: Redis as seen across a network. */
async function delayedRelay(port: number, delayMs: number) {
  const sockets = new Set<Socket>();
  const server = createServer((client) => {
    const upstream = createConnection({ port, host: "127.0.0.1" });
    for (const s of [client, upstream]) sockets.add(s);
    client.on("data", (d) => setTimeout(() => upstream.write(d), delayMs));
    upstream.on("data", (d) => setTimeout(() => client.write(d), delayMs));
    client.on("close", () => upstream.destroy());
    upstream.on("close", () => client.destroy());
    client.on("error", () => upstream.destroy());
    upstream.on("error", () => client.destroy());
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const address = server.address() as { port: number };
  return {
    url: `redis://127.0.0.1:${address.port}`,
    close: () => {
      for (const s of sockets) s.destroy();
      server.close();
    },
  };
}

const DURATION_MS = Number(process.env.BENCH_MS ?? 2_000);

/** Runs `op` with `concurrency` callers for DURATION_MS; returns operations per second. */
async function measure(op: (i: number) => Promise<unknown>, concurrency = 16): Promise<number> {
  let done = 0;
  const end = performance.now() + DURATION_MS;
  await Promise.all(
    Array.from({ length: concurrency }, async (_, worker) => {
      while (performance.now() < end) await op(worker * 1_000_000 + done++);
    }),
  );
  return done / (DURATION_MS / 1000);
}

function report(title: string, rows: [string, number][]): void {
  const base = rows[0]![1];
  console.log(`\n${title}`);
  for (const [name, rate] of rows) {
    console.log(`  ${name.padEnd(58)} ${rate.toFixed(0).padStart(8)} ops/s   ×${(rate / base).toFixed(2)}`);
  }
}

const redisServer = await startTestRedis();
const redis = createRedis(redisServer.url, {
  connectionName: "bench",
  extra: { enableAutoPipelining: true },
});
const plain = createRedis(redisServer.url, { connectionName: "bench-plain" });
await Promise.all([redis.ping(), plain.ping()]);
try {
  // 1. Rate-limit decisions over four windows, each caller its own key (all admitted).
  const limits = { second: 1e9, minute: 1e9, hour: 1e9, day: 1e9 };
  const ours = new RedisWindows(redis, "bench:ours");
  const perWindow = Object.entries(limits).map(
    ([w, points]) =>
      new RateLimiterRedis({ storeClient: plain, keyPrefix: `bench:seq:${w}`, points, duration: 60 }),
  );
  const union = new RateLimiterUnion(
    ...Object.entries(limits).map(
      ([w, points]) =>
        new RateLimiterRedis({ storeClient: plain, keyPrefix: `bench:union:${w}`, points, duration: 60 }),
    ),
  );
  const memory = new MemoryWindows();
  const relay = await delayedRelay(redisServer.port, 1);
  const farPipelined = createRedis(relay.url, {
    connectionName: "bench-far",
    extra: { enableAutoPipelining: true },
  });
  const far = createRedis(relay.url, { connectionName: "bench-far-plain" });
  await Promise.all([farPipelined.ping(), far.ping()]);
  const farOurs = new RedisWindows(farPipelined, "bench:far-ours");
  const farPerWindow = Object.entries(limits).map(
    ([w, points]) =>
      new RateLimiterRedis({ storeClient: far, keyPrefix: `bench:far-seq:${w}`, points, duration: 60 }),
  );
  report("Rate-limit decision, 4 windows, one caller, Redis 1 ms away each way (latency is what counts)", [
    [
      "4 limiters one after another (4 round trips)",
      await measure(async (i) => {
        for (const l of farPerWindow) await l.consume(`k${i % 64}`);
      }, 1),
    ],
    [
      "this gateway: WindowLimiters on Redis (1 round trip)",
      await measure((i) => farOurs.decide(`k${i % 64}`, limits), 1),
    ],
  ]);
  farPipelined.disconnect();
  far.disconnect();
  relay.close();

  report("Rate-limit decision, 4 windows, 16 concurrent callers, Redis on loopback (CPU is what counts)", [
    [
      "4 limiters one after another (4 round trips)",
      await measure(async (i) => {
        for (const l of perWindow) await l.consume(`k${i % 64}`);
      }),
    ],
    [
      "rate-limiter-flexible RateLimiterUnion (burns on refusal)",
      await measure((i) => union.consume(`k${i % 64}`)),
    ],
    [
      "this gateway: WindowLimiters on Redis (1 round trip)",
      await measure((i) => ours.decide(`k${i % 64}`, limits)),
    ],
    ["insurance: WindowLimiters in memory", await measure((i) => memory.decide(`k${i % 64}`, limits))],
  ]);

  // 2. API-key lookups: the cache with pub/sub invalidation against going to Redis every time.
  const store = new ApiKeyStore(plain);
  const secrets = await Promise.all(
    Array.from({ length: 50 }, (_, i) =>
      store
        .create({ org: "bench", owner: `u${i}`, permissions: [...DEFAULT_PERMISSIONS] })
        .then((k) => k.secret),
    ),
  );
  const logger = createLogger("bench", "silent");
  const lookup = (ttlMs: number) => {
    const subscriber = createRedis(redisServer.url, {
      connectionName: "bench-sub",
      extra: { commandTimeout: undefined },
    });
    return {
      subscriber,
      lookup: new CachedApiKeyLookup({ store, subscriber, ttlMs, staleIfErrorMs: 0, logger }),
    };
  };
  const uncached = lookup(0);
  const cached = lookup(1_000);
  await Promise.all([uncached.lookup.start(), cached.lookup.start()]);
  report("API-key lookup by secret", [
    [
      "Redis every time (API_KEY_CACHE_TTL_MS=0)",
      await measure((i) => uncached.lookup.findBySecret(secrets[i % 50]!)),
    ],
    [
      "1 s cache, pub/sub invalidation (default)",
      await measure((i) => cached.lookup.findBySecret(secrets[i % 50]!)),
    ],
  ]);
  uncached.subscriber.disconnect();
  cached.subscriber.disconnect();

  // 3. Permission checks on the local SpiceDB server through the stock client.
  const spicedb = await startTestSpiceDB();
  const client = v1.NewClient(
    spicedb.presharedKey,
    spicedb.endpoint,
    v1.ClientSecurity.INSECURE_PLAINTEXT_CREDENTIALS,
  );
  const check = (i: number) =>
    client.promises.checkPermission(
      v1.CheckPermissionRequest.create({
        resource: v1.ObjectReference.create({ objectType: "conversation", objectId: `bench/c${i % 100}` }),
        permission: "read",
        subject: v1.SubjectReference.create({
          object: v1.ObjectReference.create({ objectType: "user", objectId: "bench/u" }),
        }),
      }),
    );
  let sequential = 0;
  const end = performance.now() + DURATION_MS;
  while (performance.now() < end) await check(sequential++);
  report("CheckPermission on packages/spicedb-local (engine calls on worker threads)", [
    ["1 caller at a time", sequential / (DURATION_MS / 1000)],
    ["16 concurrent callers", await measure(check)],
  ]);
  client.close();
  await spicedb.close();
} finally {
  redis.disconnect();
  plain.disconnect();
  await redisServer.stop();
}
