/**
 * `pnpm start`: the whole stack on one machine. Runs a local redis-server
 * (data under `.data/redis`, AOF on) when `REDIS_URL` is unset, a local
 * PostgreSQL (Debian's package, data under `.data/postgres`, initdb on first
 * start) when `DATABASE_URL` is unset, the local
 * SpiceDB server (relationships under `.data/spicedb`) when `SPICEDB_ENDPOINT`
 * is unset, then the service and the gateway, forwarding their logs. Ctrl-C
 * stops everything, in the reverse order, so nothing loses its stores
 * mid-request.
 */
import { resolve } from "node:path";
import { createLogger, DEFAULT_LOCAL_SPICEDB_PORT, localPostgresPort, localRedisPort } from "@gw/core";
import { REPO_ROOT, type RunningNodeProcess, startNodeProcess } from "./node-process.ts";
import { startPostgresServer } from "./postgres-server.ts";
import { startPrometheus } from "./prometheus.ts";
import { type RunningRedis, startRedisServer, stopProcess } from "./redis-server.ts";
import { startSpiceDBLocalProcess } from "./spicedb-process.ts";

const logger = createLogger("devstack", process.env.LOG_LEVEL ?? "info");
const stoppers: (() => Promise<void>)[] = [];
let stopping = false;

async function stopAll(code: number): Promise<never> {
  if (!stopping) {
    stopping = true;
    for (const stop of stoppers.reverse()) await stop().catch(() => {});
  }
  process.exit(code);
}

async function main(): Promise<void> {
  // One absolute data directory for every process, wherever `pnpm start` was run from.
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    DATA_DIR: resolve(REPO_ROOT, process.env.DATA_DIR || ".data"),
  };
  if (!env.REDIS_URL) {
    const dir = resolve(env.DATA_DIR!, "redis");
    const port = localRedisPort(env);
    const redis: RunningRedis = await startRedisServer({
      port,
      dir,
      appendOnly: true,
      logFile: resolve(dir, "redis.log"),
    }).catch((err: Error) => {
      throw new Error(
        `${err.message}\nIs another stack already running? Port ${port} must be free, or set REDIS_URL.`,
      );
    });
    watch("redis-server", redis.process);
    env.REDIS_URL = redis.url;
    logger.info(
      { pid: redis.process.pid, url: redis.url, dir, appendonly: true },
      "local redis-server started (AOF on), with its data in the data directory",
    );
  }

  if (!env.DATABASE_URL) {
    const dir = resolve(env.DATA_DIR!, "postgres");
    const port = localPostgresPort(env);
    const postgres = await startPostgresServer({ port, dir }).catch((err: Error) => {
      throw new Error(
        `${err.message}\nIs another stack already running? Port ${port} must be free (LOCAL_POSTGRES_PORT), or set DATABASE_URL.`,
      );
    });
    watch("postgres", postgres.process, postgres.stop);
    env.DATABASE_URL = postgres.url;
    logger.info(
      { pid: postgres.process.pid, url: postgres.url, dir },
      "local PostgreSQL started, with its data in the data directory",
    );
  }

  if (!env.SPICEDB_ENDPOINT) {
    const port = Number(env.SPICEDB_LOCAL_PORT || DEFAULT_LOCAL_SPICEDB_PORT);
    const spicedb = await startSpiceDBLocalProcess({ port, env, inheritOutput: true });
    watch("spicedb-local", spicedb.process);
    logger.info(
      { pid: spicedb.process.pid, endpoint: `127.0.0.1:${port}`, dir: resolve(env.DATA_DIR!, "spicedb") },
      "local SpiceDB started, with its relationships in the data directory",
    );
    // Gateway and service find it through their defaults (SPICEDB_LOCAL_PORT, the development key, plaintext).
    env.SPICEDB_LOCAL_PORT = String(port);
  }

  const servicePort = Number(env.SERVICE_PORT ?? 8081);
  const service = await startNodeProcess({
    name: "service",
    entry: "packages/service/src/main.ts",
    port: servicePort,
    // METRICS_PORT is the gateway's: the service keeps /metrics on its own (loopback) port.
    env: { ...env, HOST: "127.0.0.1", METRICS_PORT: undefined },
    inheritOutput: true,
  });
  watch("service", service.process);
  logger.info({ pid: service.process.pid, url: service.url }, "service started");

  const gateway: RunningNodeProcess = await startNodeProcess({
    name: "gateway",
    entry: "packages/gateway/src/main.ts",
    port: Number(env.PORT ?? 8080),
    env: { ...env, SERVICE_URL: env.SERVICE_URL ?? service.url },
    inheritOutput: true,
  });
  watch("gateway", gateway.process);
  logger.info({ pid: gateway.process.pid, url: gateway.url }, "gateway started");
  if (env.PROMETHEUS_PORT) await startLocalPrometheus(env, gateway, service);
  logger.info({ gateway: gateway.url, service: service.url }, "stack is up; Ctrl-C stops it");
}

/** With PROMETHEUS_PORT: Debian's Prometheus on the deployment's jobs and rules, scraping this stack. */
async function startLocalPrometheus(env: NodeJS.ProcessEnv, ...stack: RunningNodeProcess[]): Promise<void> {
  const [gateway, service] = stack.map((p) => new URL(p.url).host);
  const prometheus = await startPrometheus({
    port: Number(env.PROMETHEUS_PORT),
    dir: resolve(env.DATA_DIR!, "prometheus"),
    targets: {
      gateway: [env.METRICS_PORT ? `127.0.0.1:${env.METRICS_PORT}` : gateway!],
      service: [service!],
      spicedb: env.SPICEDB_LOCAL_METRICS_PORT ? [`127.0.0.1:${env.SPICEDB_LOCAL_METRICS_PORT}`] : [],
    },
    metricsToken: env.METRICS_TOKEN,
    interval: "1s",
  });
  watch("prometheus", prometheus.process);
  logger.info({ url: prometheus.url }, "prometheus started, scraping the stack every second");
}

/** If any part dies, take the rest down instead of leaving a half-working stack. */
function watch(
  name: string,
  child: RunningNodeProcess["process"],
  stop: () => Promise<void> = () => stopProcess(child),
): void {
  child.once("exit", (code, signal) => {
    if (stopping) return;
    logger.error({ process: name, code, signal }, "a stack process exited; stopping the stack");
    void stopAll(1);
  });
  stoppers.push(stop);
}

for (const signal of ["SIGINT", "SIGTERM"] as const) process.once(signal, () => void stopAll(0));

main().catch((err: Error) => {
  logger.error({ err: err.message }, "stack failed to start");
  void stopAll(1);
});
