/**
 * `pnpm start`: the whole stack on one machine. Runs a local redis-server
 * (data under `.data/redis`, AOF on) when `REDIS_URL` is unset, a local
 * PostgreSQL (Debian's package, data under `.data/postgres`, initdb on first
 * start) when `DATABASE_URL` is unset, the local vector database (PGlite
 * with pgvector, data under `.data/vectors`) when `VECTOR_DATABASE_URL` is
 * unset, the local
 * SpiceDB server (relationships under `.data/spicedb`) when `SPICEDB_ENDPOINT`
 * is unset, the development model provider (`development-provider.ts`) when
 * neither `MODELS_FILE` nor `LLM_BASE_URL` names a provider, then the service
 * and the gateway, forwarding their logs.
 *
 * The stack stops as one: SIGINT or SIGTERM to `pnpm start` (or to this
 * process), any process of the stack exiting, or `pnpm start` going away
 * stops every process, in the reverse order of their start, so nothing loses
 * its stores mid-request. Each process is tied to this one
 * (`spawnStackChild`), so even a SIGKILL here leaves none running.
 */
import { createServer } from "node:net";
import { resolve } from "node:path";
import { DEFAULT_LOCAL_SPICEDB_PORT } from "@gw/core/authz/local";
import { ConfigError, exitOnConfigError, loadConfigOrExit, env as settings } from "@gw/core/config";
import { developmentSecret } from "@gw/core/development-secret";
import { parseDuration } from "@gw/core/duration";
import { createLogger } from "@gw/core/logger";
import { localPostgresPort, migrateVectorDatabase } from "@gw/core/postgres";
import { WORKERS_SHUTDOWN_GRACE_DEFAULT } from "@gw/core/process";
import { localRedisPort } from "@gw/core/redis";
import { z } from "zod";
import { DEFAULT_LOCAL_VECTOR_DATABASE_PORT, devstackConfigSchema } from "./config.ts";
import {
  ALL_DEVELOPMENT_MODELS,
  DEVELOPMENT_EMBEDDING_MODELS,
  DEVELOPMENT_MODELS,
} from "./development-provider.ts";
import { REPO_ROOT, type RunningNodeProcess, startNodeProcess } from "./node-process.ts";
import { startPostgresServer } from "./postgres-server.ts";
import { startPrometheus } from "./prometheus.ts";
import { type RunningRedis, startRedisServer, stopProcess } from "./redis-server.ts";
import { startSpiceDBLocalProcess } from "./spicedb-process.ts";
import { startVectorDatabaseProcess, vectorDatabaseTemplateFile } from "./vector-database-process.ts";

/**
 * Checked before anything starts (a bad value exits 78 naming the variable): `pnpm start`'s own settings,
 * and the ports it plans from settings of the processes it runs, which check the rest of theirs themselves.
 */
const config = loadConfigOrExit(
  devstackConfigSchema.extend({
    PORT: settings.port(8080),
    SPICEDB_LOCAL_PORT: settings.port(DEFAULT_LOCAL_SPICEDB_PORT),
    LOCAL_VECTOR_DATABASE_PORT: settings.port(DEFAULT_LOCAL_VECTOR_DATABASE_PORT),
    SPICEDB_LOCAL_METRICS_PORT: z.coerce.number().int().min(1).max(65535).optional(),
    METRICS_PORT: z.coerce.number().int().min(0).max(65535).optional(),
  }),
);
/** No provider configured: `pnpm start` runs its development provider, which answers model calls by echoing them. */
const runsDevelopmentProvider = (env: NodeJS.ProcessEnv) => !env.MODELS_FILE && !env.LLM_BASE_URL;
// Production never answers with it: a deployment that forgot its provider stops here, not at its first call.
// Nor with a development key for its vault, which `pnpm start` would otherwise make.
exitOnConfigError(() => {
  if (process.env.NODE_ENV !== "production") return;
  const problems = [
    ...(runsDevelopmentProvider(process.env)
      ? [
          "LLM_BASE_URL: required with NODE_ENV=production (or MODELS_FILE): without a provider `pnpm start` runs its development model provider, which only echoes what it is sent",
        ]
      : []),
    ...(process.env.VAULT_KEYS
      ? []
      : [
          "VAULT_KEYS: required in production (NODE_ENV=production): without it `pnpm start` gives the gateway and the service a development key kept under DATA_DIR",
        ]),
  ];
  if (problems.length > 0) throw new ConfigError(problems);
});
const logger = createLogger("devstack", config.LOG_LEVEL);
/** What must be seen whatever LOG_LEVEL says: that the stack is ready, and why it stops. */
const announce = createLogger("devstack", "info");
const stoppers: (() => Promise<void>)[] = [];
/** Process id of each process of the stack, by name. */
const processes: Record<string, number | undefined> = {};
let stopping = false;

async function stopAll(code: number): Promise<never> {
  // Asked again while stopping (pnpm passes a terminal's Ctrl-C on to this process, which had it already
  // as one of the foreground group): the stop under way goes on, in order, and ends the process.
  stopped ??= (async () => {
    stopping = true;
    const started = stoppers.length;
    for (const stop of stoppers.reverse()) await stop().catch(() => {});
    // The last line, once every process that was started has exited.
    if (started > 0) announce.info({ code, processes: started }, "stack stopped");
    process.exit(code);
  })();
  return stopped;
}
let stopped: Promise<never> | undefined;

/** A port the stack will listen on, and the setting that moves it. */
interface PlannedPort {
  port: number;
  host: string;
  /** What listens there, e.g. "the gateway". */
  what: string;
  /** The variable that sets the port, and any other way out. */
  setting: string;
}

/** Every port this stack will listen on, given its environment. */
function plannedPorts(env: NodeJS.ProcessEnv): PlannedPort[] {
  const loopback = "127.0.0.1";
  const ports: (PlannedPort | false)[] = [
    !env.REDIS_URL && {
      port: localRedisPort(env),
      host: loopback,
      what: "the local redis-server",
      setting: "LOCAL_REDIS_PORT (or REDIS_URL, to use a Redis that runs already)",
    },
    !env.DATABASE_URL && {
      port: localPostgresPort(env),
      host: loopback,
      what: "the local PostgreSQL",
      setting: "LOCAL_POSTGRES_PORT (or DATABASE_URL, to use a PostgreSQL that runs already)",
    },
    !env.VECTOR_DATABASE_URL && {
      port: config.LOCAL_VECTOR_DATABASE_PORT,
      host: loopback,
      what: "the local vector database",
      setting:
        "LOCAL_VECTOR_DATABASE_PORT (or VECTOR_DATABASE_URL, to use a PostgreSQL with pgvector that runs already)",
    },
    !env.SPICEDB_ENDPOINT && {
      port: config.SPICEDB_LOCAL_PORT,
      host: loopback,
      what: "the local SpiceDB",
      setting: "SPICEDB_LOCAL_PORT (or SPICEDB_ENDPOINT, to use a SpiceDB that runs already)",
    },
    !env.SPICEDB_ENDPOINT &&
      config.SPICEDB_LOCAL_METRICS_PORT !== undefined && {
        port: config.SPICEDB_LOCAL_METRICS_PORT,
        host: loopback,
        what: "the local SpiceDB's metrics",
        setting: "SPICEDB_LOCAL_METRICS_PORT",
      },
    runsDevelopmentProvider(env) && {
      port: config.DEVELOPMENT_PROVIDER_PORT,
      host: loopback,
      what: "the development model provider",
      setting: "DEVELOPMENT_PROVIDER_PORT (or LLM_BASE_URL, to use a model provider)",
    },
    { port: config.SERVICE_PORT, host: loopback, what: "the service", setting: "SERVICE_PORT" },
    { port: config.PORT, host: env.HOST!, what: "the gateway", setting: "PORT" },
    config.METRICS_PORT !== undefined && {
      port: config.METRICS_PORT,
      host: env.HOST!,
      what: "the gateway's metrics",
      setting: "METRICS_PORT",
    },
    config.PROMETHEUS_PORT !== undefined && {
      port: config.PROMETHEUS_PORT,
      host: loopback,
      what: "prometheus",
      setting: "PROMETHEUS_PORT",
    },
  ];
  return ports.filter((p) => p !== false);
}

/** Whether something listens on `host:port` already (a bind there fails with EADDRINUSE). */
function inUse({ port, host }: PlannedPort): Promise<boolean> {
  return new Promise((resolvePromise) => {
    const server = createServer();
    server.once("error", (err: NodeJS.ErrnoException) => resolvePromise(err.code === "EADDRINUSE"));
    server.listen({ port, host, exclusive: true }, () => server.close(() => resolvePromise(false)));
  });
}

/**
 * Before anything starts: every port the stack needs must be free. A port
 * taken (most often by a stack that runs already) is named with the setting
 * that moves it.
 */
async function checkPorts(env: NodeJS.ProcessEnv): Promise<void> {
  const taken: string[] = [];
  const parts = plannedPorts(env);
  // Two parts of the stack given one port: the second would find the first there, after it started.
  const given = new Map<number, PlannedPort>();
  for (const part of parts) {
    const first = part.port === 0 ? undefined : given.get(part.port);
    if (first)
      throw new Error(
        `port ${part.port} is given to both ${first.what} (${first.setting.split(" ")[0]}) and ${part.what} (${part.setting.split(" ")[0]}): give each its own`,
      );
    given.set(part.port, part);
  }
  for (const planned of parts) {
    if (await inUse(planned))
      taken.push(`port ${planned.port} (${planned.what}) is in use: set ${planned.setting}`);
  }
  if (taken.length > 0)
    throw new Error(`${taken.join("; ")}. Is another \`pnpm start\` running? Stop it, or move these ports.`);
}

/**
 * `pnpm start` forwards SIGINT and SIGTERM here; if it goes away without
 * doing so (it was killed), this process is handed to another parent: stop.
 */
function stopWhenOrphaned(): void {
  const parent = process.ppid;
  setInterval(() => {
    if (process.ppid === parent || stopping) return;
    announce.warn({ parent }, "the process that ran the stack is gone; stopping the stack");
    void stopAll(1);
  }, 500).unref();
}

async function main(): Promise<void> {
  // One absolute data directory for every process, wherever `pnpm start` was run from.
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    DATA_DIR: resolve(REPO_ROOT, process.env.DATA_DIR || ".data"),
    // The gateway binds the loopback interface unless told otherwise: a development stack is not a server.
    HOST: process.env.HOST || "127.0.0.1",
  };
  await checkPorts(env);
  if (!env.VAULT_KEYS) {
    const file = resolve(env.DATA_DIR!, "vault-key");
    const key = await developmentSecret(
      file,
      logger,
      "the vault (MCP credentials, provider keys)",
      "VAULT_KEYS",
    );
    env.VAULT_KEYS = `dev:${Buffer.from(key, "base64url").toString("base64")}`;
    logger.info(
      { file },
      "vault: a development key kept under DATA_DIR for the gateway and the service (production must set VAULT_KEYS)",
    );
  }
  // The stores and the development provider depend on none of each other: all start at once (PGlite
  // takes seconds, PostgreSQL's first start an initdb). Each is watched as soon as it runs; a failure
  // is thrown once every other has settled, so that the stack stops whatever did start.
  const parts: Promise<void>[] = [];
  if (!env.VECTOR_DATABASE_URL) parts.push(startLocalVectorDatabase(env));
  if (!env.REDIS_URL) parts.push(startLocalRedis(env));
  if (!env.DATABASE_URL) parts.push(startLocalPostgres(env));
  if (!env.SPICEDB_ENDPOINT) parts.push(startLocalSpiceDB(env));
  if (runsDevelopmentProvider(env)) parts.push(runDevelopmentProvider(env));
  const failed = (await Promise.allSettled(parts)).find((part) => part.status === "rejected");
  if (failed) throw failed.reason;

  const { gateway, service } = config.SERVICE_IN_GATEWAY
    ? await startGatewayWithService(env)
    : await startGatewayAndService(env);
  if (env.PROMETHEUS_PORT) await startLocalPrometheus(env, gateway, service);
  announce.info(
    { gateway: gateway.url, service: service.url, pid: process.pid, processes },
    "stack is ready; Ctrl-C stops it",
  );
}

/** redis-server with AOF on, its data under `$DATA_DIR/redis`; `REDIS_URL` for the rest. */
async function startLocalRedis(env: NodeJS.ProcessEnv): Promise<void> {
  const dir = resolve(env.DATA_DIR!, "redis");
  const redis: RunningRedis = await startRedisServer({
    port: localRedisPort(env),
    dir,
    appendOnly: true,
    logFile: resolve(dir, "redis.log"),
  });
  watch("redis-server", redis.process);
  env.REDIS_URL = redis.url;
  logger.info(
    { pid: redis.process.pid, url: redis.url, dir, appendonly: true },
    "local redis-server started (AOF on), with its data in the data directory",
  );
}

/** Debian's PostgreSQL, its cluster under `$DATA_DIR/postgres` (made by the first start); `DATABASE_URL` for the rest. */
async function startLocalPostgres(env: NodeJS.ProcessEnv): Promise<void> {
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

/** The local SpiceDB engine, its relationships under `$DATA_DIR/spicedb`. */
async function startLocalSpiceDB(env: NodeJS.ProcessEnv): Promise<void> {
  const port = config.SPICEDB_LOCAL_PORT;
  const spicedb = await startSpiceDBLocalProcess({ port, env, inheritOutput: true });
  watch("spicedb-local", spicedb.process);
  logger.info(
    { pid: spicedb.process.pid, endpoint: `127.0.0.1:${port}`, dir: resolve(env.DATA_DIR!, "spicedb") },
    "local SpiceDB started, with its relationships in the data directory",
  );
  // Gateway and service find it through their defaults (SPICEDB_LOCAL_PORT, the development key, plaintext).
  env.SPICEDB_LOCAL_PORT = String(port);
}

/** Hosted MCP tools of responses reach the gateway's proxy; its public URL as the gateway has it. */
const gatewayUrls = (env: NodeJS.ProcessEnv) => ({
  GATEWAY_URL: env.GATEWAY_URL ?? `http://127.0.0.1:${env.PORT ?? 8080}`,
  GATEWAY_PUBLIC_URL: env.GATEWAY_PUBLIC_URL ?? `http://localhost:${env.PORT ?? 8080}`,
});

/**
 * How long the stack waits for a process that runs the service's workers to stop before it kills it:
 * the service's `WORKERS_SHUTDOWN_GRACE` (10 s by default), in which it lets its background responses
 * and eval runs finish before it ends them failed, saying so (docs/api/llm.md), and 5 s more, so that
 * it can, its stores still up meanwhile. A value the service refuses stops it at start anyway.
 */
const workersGraceMs = (env: NodeJS.ProcessEnv) =>
  (parseDuration(env.WORKERS_SHUTDOWN_GRACE ?? "") ?? parseDuration(WORKERS_SHUTDOWN_GRACE_DEFAULT)!) + 5_000;

/** The default: the service, then the gateway in front of it, each a process of its own. */
async function startGatewayAndService(env: NodeJS.ProcessEnv) {
  const service = await startNodeProcess({
    name: "service",
    entry: "packages/service/src/main.ts",
    port: config.SERVICE_PORT,
    // METRICS_PORT is the gateway's: the service keeps /metrics on its own (loopback) port.
    env: { ...env, HOST: "127.0.0.1", METRICS_PORT: undefined, ...gatewayUrls(env) },
    inheritOutput: true,
  });
  watch("service", service.process, () => stopProcess(service.process, workersGraceMs(env)));
  logger.info({ pid: service.process.pid, url: service.url }, "service started");

  const gateway: RunningNodeProcess = await startNodeProcess({
    name: "gateway",
    entry: "packages/gateway/src/main.ts",
    port: config.PORT,
    env: { ...env, SERVICE_URL: env.SERVICE_URL ?? service.url },
    inheritOutput: true,
  });
  watch("gateway", gateway.process);
  logger.info({ pid: gateway.process.pid, url: gateway.url }, "gateway started");
  return { gateway, service };
}

/**
 * SERVICE_IN_GATEWAY: one process, the gateway handing the service its requests in process; the
 * service listens on SERVICE_PORT for its probes and metrics.
 */
async function startGatewayWithService(env: NodeJS.ProcessEnv) {
  const gateway = await startNodeProcess({
    name: "gateway-with-service",
    entry: "packages/gateway-with-service/src/main.ts",
    port: config.PORT,
    env: { ...env, ...gatewayUrls(env), SERVICE_PORT: String(config.SERVICE_PORT) },
    inheritOutput: true,
  });
  watch("gateway-with-service", gateway.process, () => stopProcess(gateway.process, workersGraceMs(env)));
  const service = { url: `http://127.0.0.1:${config.SERVICE_PORT}` };
  logger.info(
    { pid: gateway.process.pid, url: gateway.url, service: service.url },
    "gateway with the service in its process started",
  );
  return { gateway, service };
}

/**
 * The development model provider in a process of its own, and the service
 * pointed at it: `LLM_MODELS` are its models (`echo` and the embedding model
 * `text-embedding-3-small`, so vector stores work on a fresh machine) and
 * `LLM_DEFAULT_MODEL` is `echo`, unless they are set (to price them, say),
 * and the service lists them as owned by `development`.
 */
async function runDevelopmentProvider(env: NodeJS.ProcessEnv): Promise<void> {
  const provider = await startNodeProcess({
    name: "development-provider",
    entry: "packages/devstack/src/development-provider.ts",
    port: config.DEVELOPMENT_PROVIDER_PORT,
    env,
    isReady: (port) =>
      fetch(`http://127.0.0.1:${port}/v1/models`).then(
        (res) => res.ok,
        () => false,
      ),
    inheritOutput: true,
  });
  watch("development-provider", provider.process);
  const [model] = DEVELOPMENT_MODELS;
  env.LLM_BASE_URL = `${provider.url}/v1`;
  env.LLM_MODELS ||= ALL_DEVELOPMENT_MODELS.join(",");
  env.LLM_DEFAULT_MODEL ||= model;
  env.LLM_DEVELOPMENT_PROVIDER = "true";
  logger.info(
    { pid: provider.process.pid, url: env.LLM_BASE_URL, models: [...ALL_DEVELOPMENT_MODELS, "auto"] },
    `development model provider started: model ${model} (and auto) answers with what it is sent, ${DEVELOPMENT_EMBEDDING_MODELS.join(", ")} embeds by hashed word counts; set LLM_BASE_URL for a real provider`,
  );
}

/**
 * The local vector database (PGlite with pgvector's own code, served over
 * PostgreSQL's wire protocol), its data under `$DATA_DIR/vectors`, and the
 * service pointed at it, its migrations applied.
 */
async function startLocalVectorDatabase(env: NodeJS.ProcessEnv): Promise<void> {
  const port = config.LOCAL_VECTOR_DATABASE_PORT;
  const database = await startVectorDatabaseProcess({
    port,
    env,
    inheritOutput: true,
    templateFile: env.LOCAL_VECTOR_DATABASE_TEMPLATE ?? vectorDatabaseTemplateFile(),
  });
  watch("vector-database", database.process);
  // Before any other client: its connections share one session, where a migration's advisory lock excludes no one.
  await migrateVectorDatabase(database.databaseUrl);
  env.VECTOR_DATABASE_URL = database.databaseUrl;
  logger.info(
    { pid: database.process.pid, url: database.databaseUrl, dir: resolve(env.DATA_DIR!, "vectors") },
    "local vector database (PGlite with pgvector) started, with its data in the data directory",
  );
}

/** With PROMETHEUS_PORT: Debian's Prometheus on the deployment's jobs and rules, scraping this stack. */
async function startLocalPrometheus(
  env: NodeJS.ProcessEnv,
  ...stack: [gateway: { url: string }, service: { url: string }]
): Promise<void> {
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

/**
 * Makes `child` a process of the stack: stopped with the others (in reverse
 * order of start, by `stop`), and if it dies, the rest is taken down instead
 * of leaving a half-working stack. Spawn it with `spawnStackChild` so that it
 * dies with this process too.
 */
function watch(
  name: string,
  child: RunningNodeProcess["process"],
  stop: () => Promise<void> = () => stopProcess(child),
): void {
  child.once("exit", (code, signal) => {
    if (stopping) return;
    announce.error({ process: name, code, signal }, "a stack process exited; stopping the stack");
    void stopAll(1);
  });
  processes[name] = child.pid;
  stoppers.push(stop);
}

// `on`, not `once`: a signal with no handler would end this process at once, mid-stop (a terminal's
// Ctrl-C comes twice: to the foreground group, then again from pnpm), leaving the stack's processes to
// their parent-death signal, all at once and out of order.
for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"] as const)
  process.on(signal, () => {
    if (!stopping) announce.info({ signal }, "stopping the stack");
    void stopAll(0);
  });
stopWhenOrphaned();

main().catch((err: Error & { exitCode?: number | null }) => {
  announce.error({ err: err.message }, "stack failed to start");
  // A part that refused its settings (78, EX_CONFIG, the variable named in its output) ends the stack so too.
  void stopAll(err.exitCode === 78 ? 78 : 1);
});
