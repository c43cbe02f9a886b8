/**
 * The growth run: what grows as stored responses accumulate, and whether the
 * retention sweep keeps up. Stored responses are created through gateway and
 * service (their own processes, 8 at a time) up to each size of
 * `BENCH_GROWTH_SIZES` (default `1000,10000,100000`; `1000,3000` is a quick
 * run); at each size: the creation rate since the last size, the resident
 * memory of each process (gateway, service, the local SpiceDB, Redis), Redis's
 * data per stored response (tokens live `BENCH_GROWTH_ZEDTOKEN_TTL`, default
 * 90s, as `SPICEDB_ZEDTOKEN_TTL`; once it has passed after the last creation,
 * what is left per response is measured again), and
 * the latency of CheckPermission on resources never checked before (no cache
 * in front of it), on a stored response and on a resource type that holds
 * no relationships (the local engine's in-memory datastore finds a
 * resource's relationships by scanning every relationship of its type and
 * relation: the gap between the two is that scan), and how many times the
 * local SpiceDB replaced its engine so far (its log). Then every response is
 * made expired and the service's retention sweeper (the same code, run here
 * against the same stores) deletes them all: its rate, each process's memory
 * after, and what Redis still holds, by key prefix. Progress is printed every
 * `PROGRESS_EVERY` responses.
 *
 * Alone: `pnpm exec node test/bench/growth.ts` (prints; `BENCH_OUTPUT` writes a report);
 * `SPICEDB_LOCAL_RECYCLE_WRITES` and `SPICEDB_LOCAL_RECYCLE_FRACTION` are passed on to the local SpiceDB.
 */
import { randomBytes } from "node:crypto";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  DEFAULT_LOCAL_PRESHARED_KEY,
  PostgresGrantExpiries,
  RedisConsistencyTokens,
  SpiceDBClient,
  scopedId,
  v1,
} from "@gw/core/authz";
import { systemClock } from "@gw/core/clock";
import { parseDuration } from "@gw/core/duration";
import { createLogger } from "@gw/core/logger";
import { DEFAULT_PERMISSIONS } from "@gw/core/permissions";
import { createPostgres } from "@gw/core/postgres";
import { createRedis } from "@gw/core/redis";
import { freePort, startSpiceDBLocalProcess } from "@gw/devstack";
import { ApiKeyStore } from "@gw/gateway";
import { scanKeys, startTestPostgres, startTestRedis } from "@gw/test-kit";
import { startFakeLLM } from "@gw/test-kit/llm-upstream";
import { RetentionSweeper } from "../../packages/service/src/retention/sweeper.ts";
import { benchStackEnv, directClient, rssMiB, startServiceAndGateway } from "./http.ts";
import { Report } from "./report.ts";

const SIZES = (process.env.BENCH_GROWTH_SIZES ?? "1000,10000,100000").split(",").map(Number);
/** How long a resource's ZedToken stays in Redis (SPICEDB_ZEDTOKEN_TTL): short, so the run sees past it. */
const TOKEN_TTL = process.env.BENCH_GROWTH_ZEDTOKEN_TTL ?? "90s";
const CONCURRENCY = 8;
const CHECKS = 200;
const PROGRESS_EVERY = 5000;

export async function benchGrowth(report: Report): Promise<void> {
  const [redis, postgres, llm] = await Promise.all([startTestRedis(), startTestPostgres(), startFakeLLM()]);
  const dataDir = await mkdtemp(join(tmpdir(), "gw-bench-growth-"));
  const spicedbPort = await freePort();
  const spicedbLog = join(dataDir, "spicedb-local.log");
  const spicedb = await startSpiceDBLocalProcess({
    port: spicedbPort,
    env: {
      PATH: process.env.PATH,
      // Info: its engine replacements are counted from its log.
      LOG_LEVEL: "info",
      DATA_DIR: dataDir,
      // To compare engine replacement settings (the server's defaults otherwise).
      ...Object.fromEntries(
        ["SPICEDB_LOCAL_RECYCLE_WRITES", "SPICEDB_LOCAL_RECYCLE_FRACTION"].flatMap((name) =>
          process.env[name] ? [[name, process.env[name]]] : [],
        ),
      ),
    },
    outputFile: spicedbLog,
    timeoutMs: 600_000,
  });
  const common = {
    ...benchStackEnv({ redis: redis.url, postgres: postgres.url, spicedbPort, dataDir, logLevel: "warn" }),
    LLM_BASE_URL: llm.baseUrl,
    LLM_DEFAULT_MODEL: "echo-small",
    // The sweep is run below, on demand.
    RETENTION_SWEEP_INTERVAL: "1d",
    SPICEDB_ZEDTOKEN_TTL: TOKEN_TTL,
  };
  const { service, gateway } = await startServiceAndGateway(common, dataDir);
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
    /** Bytes Redis's data takes (`used_memory`), not its process's resident memory. */
    const redisUsed = async () => Number(/^used_memory:(\d+)/m.exec(await client.info("memory"))![1]);
    const redisBefore = await redisUsed();
    const perResponse = (used: number, n: number) => `${Math.round((used - redisBefore) / n) || 0} B`;
    /** The responses' ZedToken keys: how many, and their bytes (`MEMORY USAGE`) per stored response. */
    const tokenKeys = async (n: number) => {
      const keys = await scanKeys(client, "gw:zedtoken:{response:*");
      const sample = keys.slice(0, 200);
      const sizes = await Promise.all(
        sample.map(async (key) => Number(await client.call("MEMORY", "USAGE", key, "SAMPLES", "0"))),
      );
      const each = sizes.length ? sizes.reduce((a, b) => a + b, 0) / sizes.length : 0;
      return `${keys.length} keys of ${each.toFixed(0)} B: ${((keys.length * each) / n).toFixed(0)} B`;
    };
    let lastCreatedAt = performance.now();
    /** The local SpiceDB's engine replacements so far, from its log lines. */
    const replacements = async () => {
      const lines = (await readFile(spicedbLog, "utf8"))
        .split("\n")
        .filter((line) => line.includes("engine replaced"))
        .map((line) => JSON.parse(line) as { writesPausedMs: number; changesInPause: number });
      return {
        count: lines.length,
        longestPauseMs: Math.max(0, ...lines.map((l) => l.writesPausedMs)),
        mostInPause: Math.max(0, ...lines.map((l) => l.changesInPause)),
      };
    };
    /**
     * CheckPermission (minimize latency, as the gateway asks when no write is recent) on resources never
     * checked: stored responses, or (`type` "conversation") ids of a type this run writes no relationship of.
     */
    const uncachedChecks = async (type: "response" | "conversation" = "response") => {
      const latencies: number[] = [];
      for (let i = 0; i < CHECKS; i++) {
        const id =
          type === "response"
            ? ids[Math.floor(Math.random() * ids.length)]!
            : `conv_${randomBytes(6).toString("hex")}`;
        const started = performance.now();
        await zed.promises.checkPermission(
          v1.CheckPermissionRequest.create({
            resource: v1.ObjectReference.create({ objectType: type, objectId: scopedId("bench", id) }),
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
    const runStarted = performance.now();
    for (const size of SIZES) {
      const started = performance.now();
      let next = created;
      let done = created;
      let progressAt = performance.now();
      let progressDone = created;
      await Promise.all(
        Array.from({ length: CONCURRENCY }, async () => {
          while (next < size) {
            await create(next++);
            lastCreatedAt = performance.now();
            if (++done % PROGRESS_EVERY === 0) {
              const now = performance.now();
              console.log(
                `  … ${done} of ${SIZES.at(-1)} created, ${((done - progressDone) / ((now - progressAt) / 1000)).toFixed(0)}/s, SpiceDB ${mib(await rssMiB(spicedb.process.pid!))}, ${((now - runStarted) / 1000).toFixed(0)} s in`,
              );
              progressAt = now;
              progressDone = done;
            }
          }
        }),
      );
      const rate = (size - created) / ((performance.now() - started) / 1000);
      created = size;
      const m = await memory();
      const used = await redisUsed();
      const tokens = await tokenKeys(size);
      const check = await uncachedChecks();
      const empty = await uncachedChecks("conversation");
      const replaced = await replacements();
      rows.push([
        String(size),
        `${rate.toFixed(0)}/s`,
        mib(m.gateway),
        mib(m.service),
        mib(m.spicedb),
        mib(m.redis),
        perResponse(used, size),
        tokens,
        `${check.toFixed(2)} ms`,
        `${empty.toFixed(2)} ms`,
        `${replaced.count} (longest pause ${replaced.longestPauseMs} ms)`,
      ]);
      console.log(`  … ${size} stored responses: ${rows.at(-1)!.join(" | ")}`);
    }

    // Past the hot window: every token has left Redis by itself; what is left per stored response.
    const ttlMs = parseDuration(TOKEN_TTL)!;
    const waitMs = Math.max(0, lastCreatedAt + ttlMs + 2_000 - performance.now());
    console.log(`  … waiting ${(waitMs / 1000).toFixed(0)} s for the last tokens' ${TOKEN_TTL} to pass`);
    await new Promise((resolve) => setTimeout(resolve, waitMs));
    const cold = { used: await redisUsed(), keys: await client.dbsize(), tokens: await tokenKeys(created) };
    const ends = (
      await db.query<{ n: string; bytes: string }>(
        "SELECT count(*) AS n, pg_total_relation_size('authz_grant_expiries') AS bytes FROM authz_grant_expiries",
      )
    ).rows[0]!;

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
      expiries: new PostgresGrantExpiries(db),
      logger: createLogger("bench-sweep", "warn"),
      clock: systemClock,
      // As the service configures it with the local engine (SPICEDB_ENDPOINT unset).
      options: { responseRetentionMs: 30 * 86_400_000, sweepIntervalMs: 86_400_000, readWholeTypes: true },
    });
    /** Redis's keys by prefix (what precedes the first id or hash tag). */
    const keyPrefixes = async () => {
      const counts = new Map<string, number>();
      for (const key of await scanKeys(client, "*")) {
        const prefix = key.replace(/[{].*$/, "{…}").replace(/^((?:[^:]+:){2}).*$/, "$1…");
        counts.set(prefix, (counts.get(prefix) ?? 0) + 1);
      }
      return [...counts]
        .sort((a, b) => b[1] - a[1])
        .slice(0, 6)
        .map(([prefix, n]) => `\`${prefix}\` ${n}`)
        .join(", ");
    };
    const redisKeysBefore = await client.dbsize();
    const prefixesBefore = await keyPrefixes();
    console.log(`  … sweeping ${created} responses`);
    const sweepStarted = performance.now();
    const swept = await sweeper.sweep();
    const sweepSeconds = (performance.now() - sweepStarted) / 1000;
    spicedbClient.close();
    const after = await memory();
    const prefixesAfter = await keyPrefixes();
    const replaced = await replacements();
    const createRate = Number.parseFloat(rows.at(-1)![1]!);

    report.section(
      `Growth: stored responses up to ${SIZES.at(-1)}`,
      `Stored responses created through gateway and service (each its own process, ${CONCURRENCY} at a time, the local SpiceDB with its data directory and its default engine replacement), measured at each size: the creation rate since the size before, resident memory of each process, the p50 of ${CHECKS} CheckPermission calls (minimize latency) for subjects never asked before on random responses and on ids of a type that holds no relationships, and the local SpiceDB's engine replacements so far (with the longest time writes waited for one). Then all were made expired and the retention sweep deleted them.`,
    );
    report.table(
      [
        "stored responses",
        "created",
        "gateway",
        "service",
        "SpiceDB",
        "Redis",
        "Redis data per response",
        "of which ZedTokens",
        "uncached check p50",
        "same, type holding none",
        "engine replacements",
      ],
      rows,
    );
    report.line(
      `Redis data (\`used_memory\`) per stored response over the ${(redisBefore / 1_048_576).toFixed(1)} MiB before the first: the table's column while creating (tokens live ${TOKEN_TTL}, \`SPICEDB_ZEDTOKEN_TTL\`, here: at 1000 every response's token is still there), and ${perResponse(cold.used, created)} once the last token's ${TOKEN_TTL} had passed (${cold.keys} keys in all; the responses' ZedTokens: ${cold.tokens}). Besides the tokens, each request leaves keys that live a minute whatever is stored (internal assertions' replay guards, \`gw:assertion:…\`, 72 B each), counted in the data column while they live. The ends of the owners' grants in PostgreSQL: ${ends.n} rows, ${(Number(ends.bytes) / 1_048_576).toFixed(1)} MiB with their indexes.`,
    );
    report.line(
      `Retention sweep: ${swept?.responses} responses (rows, relationships, ZedTokens) in ${sweepSeconds.toFixed(1)} s, ${((swept?.responses ?? 0) / sweepSeconds).toFixed(0)} a second (creation: ${createRate.toFixed(0)} a second). Redis keys ${redisKeysBefore} → ${await client.dbsize()}. Memory after the sweep: gateway ${mib(after.gateway)}, service ${mib(after.service)}, SpiceDB ${mib(after.spicedb)}, Redis ${mib(after.redis)}. SpiceDB engine replacements in all: ${replaced.count}, the longest pause of writes ${replaced.longestPauseMs} ms, at most ${replaced.mostInPause} changes applied in one.`,
    );
    report.line(
      `Redis keys by prefix before the sweep: ${prefixesBefore}; after: ${prefixesAfter || "none"}.`,
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
