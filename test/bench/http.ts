/**
 * HTTP benchmarks: the gateway beside a bare Express app answering the same
 * JSON, and its check route beside authzed-node calling the same SpiceDB
 * directly. Each pair runs alternately in one run, so both sides see the
 * same machine; what is reported is their ratio.
 */
import { randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import { mkdtemp } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DEFAULT_LOCAL_PRESHARED_KEY, v1 } from "@gw/core/authz";
import type { Limits } from "@gw/core/limits";
import { DEFAULT_PERMISSIONS } from "@gw/core/permissions";
import { createRedis } from "@gw/core/redis";
import {
  freePort,
  REPO_ROOT,
  type RunningNodeProcess,
  startNodeProcess,
  startSpiceDBLocalProcess,
} from "@gw/devstack";
import { ApiKeyStore } from "@gw/gateway";
import { startTestPostgres, startTestRedis, type TestRedis } from "@gw/test-kit";
import autocannon from "autocannon";

export interface Sample {
  rps: number;
  /** Mean latency in ms (autocannon's p50 and p99 are whole milliseconds). */
  mean?: number;
  p50: number;
  p99: number;
  /** Answers other than 2xx, and errors. */
  non2xx: number;
  /** Requests answered. */
  total: number;
  /** CPU time the serving process spent per request, in µs, when measured. */
  cpuUs?: number;
}

export interface Pair {
  scenario: string;
  subject: string;
  baseline: string;
  gateway: Sample;
  bare: Sample;
}

const ROUND_SECONDS = Number(process.env.BENCH_ROUND_SECONDS ?? 3);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);

export async function load(options: {
  url: string;
  method?: "GET" | "POST";
  headers?: Record<string, string>;
  body?: string;
  connections?: number;
  seconds?: number;
  /** A number of requests instead of a duration. */
  amount?: number;
  /** The path of the n-th request (by default every request asks `url`'s). */
  pathOf?: (n: number) => string;
  /** At most this many requests a second, all connections together. */
  overallRate?: number;
}): Promise<Sample> {
  let n = 0;
  const pathOf = options.pathOf;
  const result = await autocannon({
    url: options.url,
    method: options.method ?? "GET",
    headers: options.headers ?? {},
    ...(options.body ? { body: options.body } : {}),
    ...(options.overallRate ? { overallRate: options.overallRate } : {}),
    ...(pathOf
      ? {
          requests: [
            {
              setupRequest: (request: { path: string }) => {
                request.path = pathOf(n++);
                return request;
              },
            },
          ],
        }
      : {}),
    connections: options.connections ?? 50,
    ...(options.amount ? { amount: options.amount } : { duration: options.seconds ?? ROUND_SECONDS }),
  });
  return {
    rps: result.requests.average,
    mean: result.latency.average,
    p50: result.latency.p50,
    p99: result.latency.p99,
    non2xx: result.non2xx + result.errors + result.timeouts,
    total: result.requests.total,
  };
}

/** Means of several samples: rates averaged, latencies too. */
function mean(samples: Sample[]): Sample {
  const avg = (f: (s: Sample) => number) => samples.reduce((a, s) => a + f(s), 0) / samples.length;
  return {
    rps: avg((s) => s.rps),
    p50: avg((s) => s.p50),
    p99: avg((s) => s.p99),
    non2xx: avg((s) => s.non2xx),
    total: samples.reduce((a, s) => a + s.total, 0),
    ...(samples.every((s) => s.cpuUs !== undefined) ? { cpuUs: avg((s) => s.cpuUs!) } : {}),
  };
}

/** Runs `run` and adds the CPU time process `pid` spent per request. */
export async function withCpu(pid: number, run: () => Promise<Sample>): Promise<Sample> {
  const before = cpuMs(pid);
  const sample = await run();
  return { ...sample, cpuUs: ((cpuMs(pid) - before) * 1000) / Math.max(1, sample.total) };
}

/** Runs two loads alternately, `ROUNDS` times each, after one short warm-up of each. */
export async function sideBySide(
  a: () => Promise<Sample>,
  b: () => Promise<Sample>,
): Promise<[Sample, Sample]> {
  await a();
  await b();
  const as: Sample[] = [];
  const bs: Sample[] = [];
  for (let round = 0; round < ROUNDS; round++) {
    as.push(await a());
    bs.push(await b());
  }
  return [mean(as), mean(bs)];
}

export interface Stack {
  redis: TestRedis;
  spicedbEndpoint: string;
  gateways: RunningNodeProcess[];
  /** The environment the gateways run with (to start another, e.g. under a profiler). */
  gatewayEnv: NodeJS.ProcessEnv;
  bare: RunningNodeProcess;
  /** A key with generous limits (never refused), one without, and a token minted from the first. */
  limitedKey: string;
  unlimitedKey: string;
  token: string;
  close(): Promise<void>;
}

/**
 * What every benchmark's gateway and service processes share: the stores
 * (PostgreSQL for the audit trail and content, migrated by the processes at
 * start), the local SpiceDB, a fresh assertion secret, the data directory.
 */
export function benchStackEnv(o: {
  redis: string;
  postgres: string;
  spicedbPort: number;
  dataDir: string;
  logLevel: string;
}): Record<string, string | undefined> {
  return {
    PATH: process.env.PATH,
    HOST: "127.0.0.1",
    REDIS_URL: o.redis,
    DATABASE_URL: o.postgres,
    SPICEDB_LOCAL_PORT: String(o.spicedbPort),
    GATEWAY_PUBLIC_URL: "http://gateway.bench",
    INTERNAL_ASSERTION_SECRET: randomBytes(32).toString("hex"),
    DATA_DIR: o.dataDir,
    LOG_LEVEL: o.logLevel,
  };
}

/** Redis, the local SpiceDB, `gateways` gateway processes and the bare app, each its own process. */
export async function startStack(gateways = 1): Promise<Stack> {
  const [redis, postgres] = await Promise.all([startTestRedis(), startTestPostgres()]);
  const dataDir = await mkdtemp(join(tmpdir(), "gw-bench-"));
  const spicedbPort = await freePort();
  const spicedb = await startSpiceDBLocalProcess({
    port: spicedbPort,
    env: { PATH: process.env.PATH, LOG_LEVEL: "info", DATA_DIR: dataDir },
  });
  // As in production: one info line per request.
  const env = benchStackEnv({
    redis: redis.url,
    postgres: postgres.url,
    spicedbPort,
    dataDir,
    logLevel: "info",
  });
  const started: RunningNodeProcess[] = [];
  for (let i = 0; i < gateways; i++) {
    started.push(
      await startNodeProcess({
        name: `gateway-${i}`,
        entry: "packages/gateway/src/main.ts",
        port: await freePort(),
        env,
        // Logs go to a file, as a container runtime would take them, not through this process.
        outputFile: join(dataDir, `gateway-${i}.log`),
      }),
    );
  }
  const bare = await startNodeProcess({
    name: "bare-express",
    entry: "test/bench/bare-express.ts",
    port: await freePort(),
    env: { PATH: process.env.PATH },
  });

  const client = createRedis(redis.url, { connectionName: "bench-setup" });
  const store = new ApiKeyStore(client);
  const limits: Limits = { second: 1_000_000, day: 1_000_000_000 };
  const permissions = [...DEFAULT_PERMISSIONS];
  const limitedKey = (await store.create({ org: "bench", owner: "alice", permissions, limits })).secret;
  const unlimitedKey = (await store.create({ org: "bench", owner: "alice", permissions })).secret;
  client.disconnect();
  const exchanged = await fetch(`${started[0]!.url}/api/v1/authentication/api-keys/exchange-token`, {
    method: "POST",
    headers: { authorization: `Bearer ${limitedKey}`, "content-type": "application/json" },
    body: JSON.stringify({ audience: "http://gateway.bench", externalUserId: "alice", expiresIn: 3600 }),
  });
  const { token } = (await exchanged.json()) as { token: string };
  return {
    redis,
    spicedbEndpoint: `127.0.0.1:${spicedbPort}`,
    gateways: started,
    gatewayEnv: env,
    bare,
    limitedKey,
    unlimitedKey,
    token,
    async close() {
      await Promise.all([...started.map((g) => g.stop()), bare.stop(), spicedb.stop()]);
      await Promise.all([redis.stop(), postgres.stop()]);
    },
  };
}

/** A service and a gateway in front of it, both on `env`, logging to files in `dataDir`; the caller stops them. */
export async function startServiceAndGateway(
  env: NodeJS.ProcessEnv,
  dataDir: string,
): Promise<{ service: RunningNodeProcess; gateway: RunningNodeProcess }> {
  const service = await startNodeProcess({
    name: "service",
    entry: "packages/service/src/main.ts",
    port: await freePort(),
    env,
    outputFile: join(dataDir, "service.log"),
  });
  const gateway = await startNodeProcess({
    name: "gateway",
    entry: "packages/gateway/src/main.ts",
    port: await freePort(),
    env: { ...env, SERVICE_URL: service.url },
    outputFile: join(dataDir, "gateway.log"),
  });
  return { service, gateway };
}

/** Another gateway on the stack's Redis and SpiceDB, its environment changed by `env`; the caller stops it. */
export async function startGatewayOf(
  stack: Stack,
  name: string,
  env: NodeJS.ProcessEnv,
): Promise<RunningNodeProcess> {
  return startNodeProcess({
    name,
    entry: "packages/gateway/src/main.ts",
    port: await freePort(),
    env: { ...stack.gatewayEnv, ...env },
    outputFile: join(String(stack.gatewayEnv.DATA_DIR), `${name}.log`),
  });
}

/** CPU time a process has used so far (user + system), in ms (Linux). */
export function cpuMs(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ");
  return ((Number(fields[11]) + Number(fields[12])) * 1000) / CLOCK_TICKS;
}
/** `getconf CLK_TCK` on Linux. */
const CLOCK_TICKS = 100;

/** Resident memory of a process, in MiB (Linux). */
export async function rssMiB(pid: number): Promise<number> {
  const { readFile } = await import("node:fs/promises");
  const status = await readFile(`/proc/${pid}/status`, "utf8");
  return Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0) / 1024;
}

/** A stock authzed-node client on the same SpiceDB: the check baseline. */
export function directClient(endpoint: string) {
  return v1.NewClient(
    DEFAULT_LOCAL_PRESHARED_KEY,
    endpoint,
    v1.ClientSecurity.INSECURE_PLAINTEXT_CREDENTIALS,
  );
}

export { REPO_ROOT };

/**
 * `test/bench/bare-proxy.ts` in front of `target` (an origin): the least any
 * Node proxy adds, the floor the proxy rows are read against.
 */
export async function startBareProxy(target: string, outputFile: string): Promise<RunningNodeProcess> {
  return startNodeProcess({
    name: "bare-proxy",
    entry: join(REPO_ROOT, "test/bench/bare-proxy.ts"),
    port: await freePort(),
    env: { PATH: process.env.PATH, TARGET: target },
    outputFile,
  });
}
