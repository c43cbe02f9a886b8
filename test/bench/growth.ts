/**
 * The growth run: what grows as stored responses accumulate, and whether the
 * retention sweep keeps up. Stored responses are created through gateway and
 * service (their own processes, 8 at a time) up to each size of
 * `BENCH_GROWTH_SIZES` (default `1000,10000,100000`; `1000,3000` is a quick
 * run); at each size: the creation rate since the last size, the resident
 * memory of each process (gateway, service, the local SpiceDB, Redis), and
 * the latency of CheckPermission on resources never checked before (no cache
 * in front of it). Then every response is made expired and the service's
 * retention sweeper (the same code, run here against the same stores)
 * deletes them all: its rate, and each process's memory after.
 *
 * Alone: `pnpm exec node test/bench/growth.ts` (prints; `BENCH_OUTPUT` writes a report);
 * `SPICEDB_LOCAL_RECYCLE_WRITES` is passed on to the local SpiceDB.
 */
import { randomBytes } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  DEFAULT_LOCAL_PRESHARED_KEY,
  RedisConsistencyTokens,
  SpiceDBClient,
  scopedId,
  v1,
} from "@gw/core/authz";
import { systemClock } from "@gw/core/clock";
import { createLogger } from "@gw/core/logger";
import { DEFAULT_PERMISSIONS } from "@gw/core/permissions";
import { createPostgres } from "@gw/core/postgres";
import { createRedis } from "@gw/core/redis";
import { freePort, startNodeProcess, startSpiceDBLocalProcess } from "@gw/devstack";
import { ApiKeyStore } from "@gw/gateway";
import { startTestPostgres, startTestRedis } from "@gw/test-kit";
import { startFakeLLM } from "@gw/test-kit/llm-upstream";
import { RetentionSweeper } from "../../packages/service/src/retention/sweeper.ts";
import { benchStackEnv, directClient, rssMiB } from "./http.ts";
import { Report } from "./report.ts";

const SIZES = (process.env.BENCH_GROWTH_SIZES ?? "1000,10000,100000").split(",").map(Number);
const CONCURRENCY = 8;
const CHECKS = 200;

export async function benchGrowth(report: Report): Promise<void> {
  const [redis, postgres, llm] = await Promise.all([startTestRedis(), startTestPostgres(), startFakeLLM()]);
  const dataDir = await mkdtemp(join(tmpdir(), "gw-bench-growth-"));
  const spicedbPort = await freePort();
  const spicedb = await startSpiceDBLocalProcess({
    port: spicedbPort,
    env: {
      PATH: process.env.PATH,
      LOG_LEVEL: "warn",
      DATA_DIR: dataDir,
      // To compare engine replacement settings (the server's default otherwise).
      ...(process.env.SPICEDB_LOCAL_RECYCLE_WRITES
        ? { SPICEDB_LOCAL_RECYCLE_WRITES: process.env.SPICEDB_LOCAL_RECYCLE_WRITES }
        : {}),
    },
    timeoutMs: 600_000,
  });
  const common = {
    ...benchStackEnv({ redis: redis.url, postgres: postgres.url, spicedbPort, dataDir, logLevel: "warn" }),
    LLM_BASE_URL: llm.baseUrl,
    LLM_DEFAULT_MODEL: "echo-small",
    // The sweep is run below, on demand.
    RETENTION_SWEEP_INTERVAL: "1d",
  };
  const service = await startNodeProcess({
    name: "service",
    entry: "packages/service/src/main.ts",
    port: await freePort(),
    env: common,
    outputFile: join(dataDir, "service.log"),
  });
  const gateway = await startNodeProcess({
    name: "gateway",
    entry: "packages/gateway/src/main.ts",
    port: await freePort(),
    env: { ...common, SERVICE_URL: service.url },
    outputFile: join(dataDir, "gateway.log"),
  });
  const client = createRedis(redis.url, { connectionName: "bench-growth" });
  const db = createPostgres(postgres.url, { connectionName: "bench-growth" });
  const zed = directClient(`127.0.0.1:${spicedbPort}`);
  try {
    const { secret } = await new ApiKeyStore(client).create({
      org: "bench",
      owner: "backend",
      permissions: [...DEFAULT_PERMISSIONS],
    });
    const headers = {
      authorization: `Bearer ${secret}`,
      "x-on-behalf-of": "alice",
      "content-type": "application/json",
    };
    const ids: string[] = [];
    const create = async (i: number) => {
      const res = await fetch(`${gateway.url}/api/v1/llm/responses`, {
        method: "POST",
        headers,
        body: JSON.stringify({ input: `question ${i}`, store: true }),
      });
      if (!res.ok) throw new Error(`create: HTTP ${res.status} ${await res.text()}`);
      ids.push(((await res.json()) as { id: string }).id);
    };
    const memory = async () => ({
      gateway: await rssMiB(gateway.process.pid!),
      service: await rssMiB(service.process.pid!),
      spicedb: await rssMiB(spicedb.process.pid!),
      redis: await rssMiB(redis.process.pid!),
    });
    const mib = (n: number) => `${n.toFixed(0)} MiB`;
    /** CheckPermission (minimize latency, as the gateway asks when no write is recent) on resources never checked. */
    const uncachedChecks = async () => {
      const latencies: number[] = [];
      for (let i = 0; i < CHECKS; i++) {
        const id = ids[Math.floor(Math.random() * ids.length)]!;
        const started = performance.now();
        await zed.promises.checkPermission(
          v1.CheckPermissionRequest.create({
            resource: v1.ObjectReference.create({ objectType: "response", objectId: scopedId("bench", id) }),
            permission: "read",
            subject: v1.SubjectReference.create({
              object: v1.ObjectReference.create({
                objectType: "user",
                objectId: scopedId("bench", `u${randomBytes(4).toString("hex")}`),
              }),
            }),
            consistency: v1.Consistency.create({
              requirement: { oneofKind: "minimizeLatency", minimizeLatency: true },
            }),
          }),
        );
        latencies.push(performance.now() - started);
      }
      latencies.sort((a, b) => a - b);
      return latencies[Math.floor(latencies.length / 2)]!;
    };

    const rows: string[][] = [];
    let created = 0;
    for (const size of SIZES) {
      const started = performance.now();
      let next = created;
      await Promise.all(
        Array.from({ length: CONCURRENCY }, async () => {
          while (next < size) await create(next++);
        }),
      );
      const rate = (size - created) / ((performance.now() - started) / 1000);
      created = size;
      const m = await memory();
      const check = await uncachedChecks();
      rows.push([
        String(size),
        `${rate.toFixed(0)}/s`,
        mib(m.gateway),
        mib(m.service),
        mib(m.spicedb),
        mib(m.redis),
        `${check.toFixed(2)} ms`,
      ]);
      console.log(`  … ${size} stored responses`);
    }

    // Every response expired, then swept by the service's own sweeper code against the same stores.
    await db.query("UPDATE responses SET stored_at = stored_at - interval '400 days'");
    const spicedbClient = new SpiceDBClient({
      endpoint: `127.0.0.1:${spicedbPort}`,
      presharedKey: DEFAULT_LOCAL_PRESHARED_KEY,
      insecure: true,
      deadlineMs: 60_000,
    });
    const sweeper = new RetentionSweeper({
      db,
      spicedb: spicedbClient,
      tokens: new RedisConsistencyTokens(client, 5_000),
      logger: createLogger("bench-sweep", "warn"),
      clock: systemClock,
      options: { responseRetentionMs: 30 * 86_400_000, sweepIntervalMs: 86_400_000 },
    });
    const redisKeysBefore = await client.dbsize();
    const sweepStarted = performance.now();
    const swept = await sweeper.sweep();
    const sweepSeconds = (performance.now() - sweepStarted) / 1000;
    spicedbClient.close();
    const after = await memory();
    const createRate = Number.parseFloat(rows.at(-1)![1]!);

    report.section(
      `Growth: stored responses up to ${SIZES.at(-1)}`,
      `Stored responses created through gateway and service (each its own process, ${CONCURRENCY} at a time, the local SpiceDB with its data directory), measured at each size: the creation rate since the size before, resident memory of each process, and the p50 of ${CHECKS} CheckPermission calls (minimize latency) on random responses for subjects never asked before. Then all were made expired and the retention sweep deleted them.`,
    );
    report.table(
      ["stored responses", "created", "gateway", "service", "SpiceDB", "Redis", "uncached check p50"],
      rows,
    );
    report.line(
      `Retention sweep: ${swept?.responses} responses (rows, relationships, ZedTokens) in ${sweepSeconds.toFixed(1)} s, ${((swept?.responses ?? 0) / sweepSeconds).toFixed(0)} a second (creation: ${createRate.toFixed(0)} a second). Redis keys ${redisKeysBefore} → ${await client.dbsize()}. Memory after the sweep: gateway ${mib(after.gateway)}, service ${mib(after.service)}, SpiceDB ${mib(after.spicedb)}, Redis ${mib(after.redis)}.`,
    );
  } catch (err) {
    // What the processes said, to explain a failed call.
    for (const proc of [gateway, service, spicedb])
      console.error(`--- ${proc.name}'s last output:\n${proc.outputTail().slice(-3000)}`);
    throw err;
  } finally {
    zed.close();
    client.disconnect();
    await db.close();
    await gateway.stop();
    await service.stop();
    await spicedb.stop();
    await Promise.all([redis.stop(), postgres.stop(), llm.close()]);
    await rm(dataDir, { recursive: true, force: true });
  }
}

if (import.meta.main) {
  const report = new Report();
  const startedAt = new Date();
  const { loadavg } = await import("node:os");
  const load = loadavg() as [number, number, number];
  await benchGrowth(report);
  if (process.env.BENCH_OUTPUT) await report.write(process.env.BENCH_OUTPUT, startedAt, load);
  process.exit(0);
}
