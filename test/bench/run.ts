/**
 * `pnpm bench`: side-by-side measurements on this machine, in one run, as
 * ratios. Nothing here is asserted; numbers depend on the machine's load.
 */

// First: `--help` prints the usage and exits before any other module runs.
import { benchBackground } from "./background.ts";
import "./usage.ts";
import { execFile } from "node:child_process";
import { mkdtemp, readdir, rm, stat } from "node:fs/promises";
import { createConnection, createServer, type Socket } from "node:net";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { v1 } from "@gw/core/authz";
import { createLogger } from "@gw/core/logger";
import { DEFAULT_PERMISSIONS } from "@gw/core/permissions";
import { createRedis } from "@gw/core/redis";
import { freePort, REPO_ROOT, startSpiceDBLocalProcess } from "@gw/devstack";
import { ApiKeyStore } from "@gw/gateway";
import { startSpiceDBLocal } from "@gw/spicedb-local";
import { startTestRedis, startTestSpiceDB } from "@gw/test-kit";
import { RateLimiterRedis, RateLimiterUnion } from "rate-limiter-flexible";
import { CachedApiKeyLookup } from "../../packages/gateway/src/api-keys/lookup.ts";
import { MemoryWindows } from "../../packages/gateway/src/rate-limit/memory-windows.ts";
import { benchAdmission, benchTokenizerWorstCase, requestWindows } from "./budgets.ts";
import { benchFileUpload } from "./file-upload.ts";
import { benchGateway } from "./gateway-http.ts";
import { benchGrowth } from "./growth.ts";
import { benchGuardrails } from "./guardrails.ts";
import { benchGuardrailsPipeline } from "./guardrails-pipeline.ts";
import { benchIngestion } from "./ingestion.ts";
import { benchModelCalls } from "./model-calls.ts";
import { Report } from "./report.ts";
import { benchResponseCache } from "./response-cache.ts";
import { benchRouting } from "./routing.ts";
import { benchVectorSearch } from "./vector-search.ts";
import { benchVictim } from "./victim.ts";

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

const md = new Report();
const startedAt = new Date();
const loadBefore = loadavg() as [number, number, number];
// First the figures users compare gateways by: model calls beside the provider called directly.
if (process.env.BENCH_ONLY === "mcp") {
  await benchMcp(md);
  await writeReport();
}
if (process.env.BENCH_ONLY === "files") {
  await benchFileUpload(md);
  await writeReport();
}
if (
  ![
    "gateway",
    "growth",
    "victim",
    "routing",
    "vectors",
    "ingestion",
    "guardrails",
    "cache",
    "background",
  ].includes(process.env.BENCH_ONLY ?? "")
)
  await benchModelCalls(md);
if (process.env.BENCH_ONLY === "model") await writeReport();
// What a response-cache hit adds beside the provider.
if (process.env.BENCH_ONLY === undefined || process.env.BENCH_ONLY === "cache") await benchResponseCache(md);
if (process.env.BENCH_ONLY === "cache") await writeReport();
// What routing model names through the catalogue costs: a decision, and one deployment beside the code before.
if (process.env.BENCH_ONLY === undefined || process.env.BENCH_ONLY === "routing") await benchRouting(md);
if (process.env.BENCH_ONLY === "routing") await writeReport();
// Then what one tenant's large calls do to another's small ones.
if (process.env.BENCH_ONLY === undefined || process.env.BENCH_ONLY === "victim") await benchVictim(md);
if (process.env.BENCH_ONLY === "victim") await writeReport();
// Guardrail checks in this process: 10,000 banned entries over 100 KB, the default checks over 4 KB.
if (process.env.BENCH_ONLY === undefined || process.env.BENCH_ONLY === "guardrails") {
  await benchGuardrails(md);
  // And what they add to a model call in the pipeline (input before admission, output whole or held back).
  await benchGuardrailsPipeline(md);
}
if (process.env.BENCH_ONLY === "guardrails") await writeReport();
// Vector search with the permission filter, over 100,000 chunks.
if (process.env.BENCH_ONLY === undefined || process.env.BENCH_ONLY === "vectors") await benchVectorSearch(md);
if (process.env.BENCH_ONLY === "vectors") await writeReport();
// Vector-store ingestion: chunks a second through extraction, chunking and the vector index, the provider's time excluded.
if (process.env.BENCH_ONLY === undefined || process.env.BENCH_ONLY === "ingestion") await benchIngestion(md);
if (process.env.BENCH_ONLY === "ingestion") await writeReport();
// Background responses: queued to completed a second, and a resumed stream's first event.
if (process.env.BENCH_ONLY === undefined || process.env.BENCH_ONLY === "background")
  await benchBackground(md);
if (process.env.BENCH_ONLY === "background") await writeReport();
if (process.env.BENCH_ONLY === "growth") {
  await benchGrowth(md);
  await writeReport();
}
await benchGateway(md);
// BENCH_ONLY=gateway: the HTTP benchmarks alone (a quick look; the rest takes minutes more).
if (process.env.BENCH_ONLY === "gateway") await writeReport();

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
  const ours = requestWindows(redis, "bench:ours");
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
  const farOurs = requestWindows(farPipelined, "bench:far-ours");
  const farPerWindow = Object.entries(limits).map(
    ([w, points]) =>
      new RateLimiterRedis({ storeClient: far, keyPrefix: `bench:far-seq:${w}`, points, duration: 60 }),
  );
  md.rates("Rate-limit decision, 4 windows, one caller, Redis 1 ms away each way (latency is what counts)", [
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

  md.rates("Rate-limit decision, 4 windows, 16 concurrent callers, Redis on loopback (CPU is what counts)", [
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
  await benchAdmission(md, redis, measure);
  await benchTokenizerWorstCase(md);

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
  md.rates("API-key lookup by secret", [
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
  md.rates("CheckPermission on packages/spicedb-local (engine calls on worker threads)", [
    ["1 caller at a time", sequential / (DURATION_MS / 1000)],
    ["16 concurrent callers", await measure(check)],
  ]);
  client.close();
  await spicedb.close();

  await benchPersistence();
  await benchContentStore();
  await benchMcp(md);
  await benchFileUpload(md);
  await benchGrowth(md);
} finally {
  redis.disconnect();
  plain.disconnect();
  await redisServer.stop();
}
await writeReport();

/** Writes the report to `BENCH_OUTPUT` (a reduced run should not replace BENCHMARKS.md) and ends. */
async function writeReport(): Promise<never> {
  const output = process.env.BENCH_OUTPUT ?? join(REPO_ROOT, "BENCHMARKS.md");
  await md.write(output, startedAt, loadBefore);
  console.log(`\nwrote ${output}`);
  process.exit(0);
}

/**
 * MCP `tools/call` through the gateway's proxy beside the same call made
 * directly to the upstream (test/bench/mcp.ts, in its own process).
 */
async function benchMcp(md: Report): Promise<void> {
  const output = await new Promise<string>((resolve, reject) =>
    execFile(
      process.execPath,
      [join(REPO_ROOT, "test/bench/mcp.ts")],
      { cwd: REPO_ROOT, maxBuffer: 1 << 20 },
      (err, stdout) => (err ? reject(err) : resolve(stdout)),
    ),
  );
  const r = JSON.parse(output.trim().split("\n").at(-1)!) as McpFigures;
  md.section(
    "MCP tools/call: through the proxy and direct",
    "The official SDK client calling the test-kit's MCP server's `search` tool, directly, through a Node proxy with no logic (`test/bench/bare-proxy.ts`: the floor) and through the gateway's proxy (API key, the per-tool check in SpiceDB, the vault's shared credential opened, the audit record, a pooled upstream session), alternating call by call. The gateway, the upstream and SpiceDB each run in their own process, the gateway logging one line per request as in production. Concurrency 1 gives the latency each adds (goal for the gateway: under 1 ms); 16 the throughput ratio (goal: over ×0.5) and the CPU per call of the proxy in front.",
  );
  const row = (name: string, p50: number, p99: number, rps: number, cpu: string) => [
    name,
    p50.toFixed(2),
    p99.toFixed(2),
    name === "direct" ? "–" : (p50 - r.direct_p50_ms).toFixed(2),
    rps.toFixed(0),
    `×${(rps / r.direct_rps_16).toFixed(2)}`,
    cpu,
  ];
  md.table(
    ["", "p50 ms (c=1)", "p99 ms (c=1)", "added p50 ms", "calls/s (c=16)", "ratio", "CPU per call (c=16)"],
    [
      row("direct", r.direct_p50_ms, r.direct_p99_ms, r.direct_rps_16, "–"),
      row(
        "through a bare Node proxy (the floor)",
        r.bare_p50_ms,
        r.bare_p99_ms,
        r.bare_rps_16,
        `${r.bare_cpu_ms_per_call.toFixed(2)} ms`,
      ),
      row(
        "through the gateway's proxy",
        r.proxy_p50_ms,
        r.proxy_p99_ms,
        r.proxy_rps_16,
        `${r.proxy_cpu_ms_per_call.toFixed(2)} ms`,
      ),
    ],
  );
}

/** What `test/bench/mcp.ts` prints (its last line). */
interface McpFigures {
  direct_p50_ms: number;
  direct_p99_ms: number;
  direct_rps_16: number;
  bare_p50_ms: number;
  bare_p99_ms: number;
  bare_rps_16: number;
  bare_cpu_ms_per_call: number;
  proxy_p50_ms: number;
  proxy_p99_ms: number;
  proxy_rps_16: number;
  proxy_cpu_ms_per_call: number;
}

/**
 * 5. Stored responses through the whole path (test/bench/content-store.ts, in
 * its own process): what Redis keeps as content grows, PostgreSQL's bytes per
 * response, latencies, the retention sweep. `BENCH_CONTENT_RESPONSES`
 * responses (default 10000).
 */
async function benchContentStore(): Promise<void> {
  const total = Number(process.env.BENCH_CONTENT_RESPONSES ?? 10_000);
  const output = await new Promise<string>((resolve, reject) =>
    execFile(
      process.execPath,
      [join(REPO_ROOT, "test/bench/content-store.ts"), String(total)],
      { cwd: REPO_ROOT, maxBuffer: 1 << 20 },
      (err, stdout) => (err ? reject(err) : resolve(stdout)),
    ),
  );
  md.section(
    "Stored responses: Redis and PostgreSQL",
    `${total} short responses created through the gateway (8 at a time), then read, then swept by retention. Redis keeps no content: what it gains per response is the response's ZedToken, one key kept for \`SPICEDB_ZEDTOKEN_TTL\` (an hour by default, longer than this run) for read-after-write consistency and the decision cache, and for the minute they live the internal assertions' replay guards of each request (the growth run shows Redis once the tokens have gone).`,
  );
  for (const line of output.trim().split("\n")) md.line(`- ${line}`);
}

/** 4. The local SpiceDB's data directory: what storing costs writes, and how long a start replays. */
async function benchPersistence(): Promise<void> {
  const schemaFile = join(REPO_ROOT, "spicedb/schema.zed");
  const key = "bench";
  const relationship = (id: string) =>
    v1.Relationship.create({
      resource: v1.ObjectReference.create({ objectType: "conversation", objectId: `bench/${id}` }),
      relation: "reader",
      subject: v1.SubjectReference.create({
        object: v1.ObjectReference.create({ objectType: "user", objectId: "bench/u" }),
      }),
    });
  const touch = (ids: string[]) =>
    v1.WriteRelationshipsRequest.create({
      updates: ids.map((id) => ({
        operation: v1.RelationshipUpdate_Operation.TOUCH,
        relationship: relationship(id),
      })),
    });
  const open = async (dataDir?: string) => {
    const server = await startSpiceDBLocal({
      host: "127.0.0.1",
      port: 0,
      presharedKey: key,
      schemaFile,
      dataDir,
    });
    const client = v1.NewClient(key, server.endpoint, v1.ClientSecurity.INSECURE_PLAINTEXT_CREDENTIALS);
    return {
      server,
      client,
      close: async () => {
        client.close();
        await server.close();
      },
    };
  };
  /** Bytes of the data directory's database and its write-ahead log. */
  const bytesOf = async (dir: string) => {
    let total = 0;
    for (const file of await readdir(dir)) total += (await stat(join(dir, file))).size;
    return total;
  };
  /** Spawns `spicedb-local` on `dataDir`; resolves once its gRPC health check answers SERVING. */
  const spawnServer = async (dataDir: string, env: NodeJS.ProcessEnv = {}) =>
    startSpiceDBLocalProcess({
      port: await freePort(),
      env: { PATH: process.env.PATH, DATA_DIR: dataDir, LOG_LEVEL: "warn", ...env },
      timeoutMs: 600_000,
    });
  /** Milliseconds from spawning `spicedb-local` on `dataDir` to its health check answering SERVING. */
  const timedStart = async (dataDir: string) => {
    const started = performance.now();
    const child = await spawnServer(dataDir);
    const ms = performance.now() - started;
    await child.stop();
    return ms;
  };
  // Each engine started in this process runs a little slower than the one before, so the two
  // modes alternate (A B B A) and each row is their mean.
  const rates = { memory: 0, stored: 0 };
  let bytesPerWrite = 0;
  for (const mode of ["memory", "stored", "stored", "memory"] as const) {
    const dataDir = mode === "stored" ? await mkdtemp(join(tmpdir(), "bench-spicedb-")) : undefined;
    const { server, client, close } = await open(dataDir);
    const rate = await measure((i) => client.promises.writeRelationships(touch([`w${i}`])));
    rates[mode] += rate / 2;
    if (dataDir) {
      await server.persistence!.sync();
      bytesPerWrite = (await bytesOf(dataDir)) / (rate * (DURATION_MS / 1000));
    }
    await close();
    if (dataDir) await rm(dataDir, { recursive: true, force: true });
  }
  md.rates("WriteRelationships on packages/spicedb-local, one relationship each, 16 concurrent callers", [
    ["in memory (nothing kept)", rates.memory],
    ["stored in a data directory (answered once stored)", rates.stored],
  ]);
  md.line(
    `Data directory: ${bytesPerWrite.toFixed(0)} bytes per relationship written (database and its WAL).`,
  );

  const sizes = (process.env.BENCH_SPICEDB_SIZES ?? "10000,100000").split(",").map(Number);
  const empty = await mkdtemp(join(tmpdir(), "bench-spicedb-"));
  const rows: string[][] = [["empty data directory", `${(await timedStart(empty)).toFixed(0)} ms`]];
  await rm(empty, { recursive: true, force: true });
  for (const size of sizes) {
    const dataDir = await mkdtemp(join(tmpdir(), "bench-spicedb-"));
    const dir = join(dataDir, "spicedb");
    const loader = await open(dir);
    for (let i = 0; i < size; i += 1000) {
      const ids = Array.from({ length: Math.min(1000, size - i) }, (_, j) => `r${i + j}`);
      await loader.client.promises.writeRelationships(touch(ids));
    }
    await loader.close();
    const bytes = await bytesOf(dir);
    rows.push([
      `${size} relationships (${(bytes / 1e6).toFixed(1)} MB)`,
      `${(await timedStart(dataDir)).toFixed(0)} ms`,
    ]);
    await rm(dataDir, { recursive: true, force: true });
  }
  md.section(
    "Start of packages/spicedb-local",
    "Process spawned until its gRPC health check answers SERVING.",
  );
  md.table(["data directory", "start"], rows);
}
