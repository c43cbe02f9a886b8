import { type ChildProcess, execFile, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { createConnection, createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Writable } from "node:stream";
import { promisify } from "node:util";
import { v1 } from "@gw/core/authz";
import { createLogger, type Logger } from "@gw/core/logger";
import { migrateVectorDatabase } from "@gw/core/postgres";
import { createRedis, type RedisClient } from "@gw/core/redis";
import {
  freePort,
  localServerUrl,
  type RunningNodeProcess,
  type RunningPostgres,
  type RunningRedis,
  startNodeProcess,
  startPostgresServer,
  startRedisServer,
  startVectorDatabaseProcess,
  vectorDatabaseTemplateFile,
} from "@gw/devstack";
import pg from "pg";
import { afterAll, beforeAll, describe, inject } from "vitest";
import { MIGRATED_TEMPLATE } from "./postgres-global-setup.ts";

export {
  freePort,
  REPO_ROOT,
  type RunningNodeProcess,
  startNodeProcess,
  startSpiceDBLocalProcess,
} from "@gw/devstack";
export { startTestPostgres, type TestPostgres } from "./postgres-global-setup.ts";
export { type RawResponse, rawHttp } from "./raw-http.ts";
export { startTestSpiceDB, type TestSpiceDB } from "./test-spicedb.ts";

const execFileAsync = promisify(execFile);

/** The Redis deployments the suite runs against: one server, and a three-master Redis Cluster. */
export type RedisTopology = "single" | "cluster";
/** Both topologies, for `describe.each(REDIS_TOPOLOGIES)` over a file's Redis tests. */
export const REDIS_TOPOLOGIES: readonly RedisTopology[] = ["single", "cluster"];

/**
 * `describe.each(REDIS_TOPOLOGIES)(name, body)` with the topologies' blocks at the same time: each
 * starts its own Redis (and whatever else it uses) and runs its tests one after another as any block
 * does, but one block's waits (on real time, on processes) overlap the other's. Only for blocks that
 * share nothing else while they run: no `process.env`, no spies on shared modules.
 */
export function describeEachTopology(name: string, body: (topology: RedisTopology) => void): void {
  describe.each(REDIS_TOPOLOGIES)(name, { concurrent: true }, (topology) => {
    // Tests inherit `concurrent` from their block: this one puts them back in turn.
    describe("in turn", { concurrent: false }, () => body(topology));
  });
}

/** A test's Redis, whichever its topology. */
export interface TestRedisStore {
  topology: RedisTopology;
  /** What `REDIS_URL` says to reach it (`redis+cluster://…` for a cluster). */
  url: string;
  /** Every redis-server behind `url`: the one server, or each master of the cluster. */
  nodes: { url: string; port: number }[];
  /** Stops every server, keeping ports and data, as an outage would. */
  halt(): Promise<void>;
  /** Starts them again on the same ports after `halt`. */
  restart(): Promise<void>;
  stop(): Promise<void>;
}

export interface TestRedis extends RunningRedis, TestRedisStore {
  topology: "single";
}

/** A real redis-server for one test file: free port, its own temporary data directory. */
export async function startTestRedis(): Promise<TestRedis> {
  const dir = await mkdtemp(join(tmpdir(), "gw-test-redis-"));
  for (let attempt = 1; ; attempt++) {
    try {
      let redis = await startRedisServer({ port: await freePort(), dir, appendOnly: false });
      return {
        ...redis,
        topology: "single",
        nodes: [{ url: redis.url, port: redis.port }],
        halt: () => redis.stop(),
        async restart() {
          redis = await startRedisServer({ port: redis.port, dir, appendOnly: false });
        },
        async stop() {
          await redis.stop();
          await rm(dir, { recursive: true, force: true });
        },
      };
    } catch (err) {
      // Another process may have taken the port between our probe and redis-server's bind.
      if (attempt >= 3) throw err;
    }
  }
}

/**
 * A real Redis Cluster for one test file: three masters (`redis-server
 * --cluster-enabled yes`) on free ports, joined as `redis-cli --cluster
 * create` joins them, every slot served before this resolves.
 */
export async function startTestRedisCluster(masters = 3): Promise<TestRedisStore> {
  const root = await mkdtemp(join(tmpdir(), "gw-test-redis-cluster-"));
  let servers: RunningRedis[] = [];
  let config: { port: number; busPort: number; dir: string }[] = [];
  const startEach = () =>
    config.map((c) => startRedisServer({ ...c, appendOnly: false, clusterBusPort: c.busPort }));
  for (let attempt = 1; ; attempt++) {
    const ports = await distinctFreePorts(masters * 2);
    config = Array.from({ length: masters }, (_, i) => ({
      port: ports[2 * i]!,
      busPort: ports[2 * i + 1]!,
      dir: join(root, `attempt-${attempt}-node-${i}`),
    }));
    const started = await Promise.allSettled(startEach());
    servers = started.flatMap((r) => (r.status === "fulfilled" ? [r.value] : []));
    if (servers.length === masters) break;
    await Promise.all(servers.map((server) => server.stop()));
    // Another process may have taken a port between our probe and redis-server's bind.
    if (attempt >= 3) throw (started.find((r) => r.status === "rejected") as PromiseRejectedResult).reason;
  }
  const addresses = config.map((c) => `127.0.0.1:${c.port}`);
  await joinCluster(config);
  await untilClusterServes(config.map((c) => c.port));
  return {
    topology: "cluster",
    url: `redis+cluster://${addresses.join(",")}`,
    nodes: servers.map((s) => ({ url: s.url, port: s.port })),
    halt: async () => {
      await Promise.all(servers.map((server) => server.stop()));
    },
    async restart() {
      servers = await Promise.all(startEach());
      await untilClusterServes(config.map((c) => c.port));
    },
    async stop() {
      await Promise.all(servers.map((server) => server.stop()));
      await rm(root, { recursive: true, force: true });
    },
  };
}

/** A test Redis of the given topology. */
export function startTestRedisOf(topology: RedisTopology): Promise<TestRedisStore> {
  return topology === "cluster" ? startTestRedisCluster() : startTestRedis();
}

/**
 * A test Redis of `topology` whose start begins now, for a `beforeAll` to take
 * later (`const redis = redisStartedEarly(topology)` in a `describe` callback,
 * `await redis()` in its `beforeAll`). It matters for a Redis Cluster: its masters
 * serve nothing for their first two seconds (a delay built into Redis before a
 * master of a failed cluster takes writes), which then pass while the file's
 * earlier blocks run instead of before this block's tests. One Redis per call, however often it is taken; the taker stops
 * it. One never taken (its tests filtered out) ends with the test process, as
 * every process a test starts does.
 */
export function redisStartedEarly(topology: RedisTopology): () => Promise<TestRedisStore> {
  if (topology === "single") return startTestRedis;
  const started = startTestRedisCluster();
  started.catch(() => {}); // its error reaches whoever takes it
  return () => started;
}

/**
 * Per `describe` block (or file): a test Redis of `topology` and a client of
 * it (`createRedis`, as the processes connect), torn down afterwards; a
 * cluster's start begins as the block is collected (`redisStartedEarly`).
 */
/**
 * A test's own Redis client. It sees the outages its test makes (a halted server): each failure
 * reaches the command that fails, and the connection's errors are not printed as unhandled.
 */
export function testRedisClient(url: string): RedisClient {
  const redis = createRedis(url, { connectionName: "test" });
  redis.on("error", () => {});
  return redis;
}

export function useTestRedis(topology: RedisTopology = "single"): {
  server: TestRedisStore;
  redis: RedisClient;
} {
  const holder = {} as { server: TestRedisStore; redis: RedisClient };
  const server = redisStartedEarly(topology);
  beforeAll(async () => {
    holder.server = await server();
    holder.redis = testRedisClient(holder.server.url);
  });
  afterAll(async () => {
    holder.redis?.disconnect();
    await holder.server?.stop();
  });
  return holder;
}

/**
 * Every key matching `pattern` (a `SCAN MATCH` glob) on every master of
 * `redis`: `KEYS` or `SCAN` sent through a Cluster client asks one master only.
 */
export async function scanKeys(redis: RedisClient, pattern: string): Promise<string[]> {
  const found = new Set<string>();
  const nodes = "nodes" in redis ? redis.nodes("master") : [redis];
  for (const node of nodes) {
    let cursor = "0";
    do {
      const [next, keys] = await node.scan(cursor, "MATCH", pattern, "COUNT", 1000);
      for (const key of keys) found.add(key);
      cursor = next;
    } while (cursor !== "0");
  }
  return [...found].sort();
}

/**
 * Every command the servers of `redis` carry out from now until `stop`
 * (`redis-cli monitor` on each node), each as its lower-cased name and its
 * arguments. `stop` first waits until each monitor has shown a marker sent
 * after everything before it, so no command is missed.
 */
export async function monitorCommands(
  redis: Pick<TestRedisStore, "nodes">,
): Promise<{ commands: string[][]; stop(): Promise<void> }> {
  const commands: string[][] = [];
  const marker = `monitor-end-${randomBytes(6).toString("hex")}`;
  const monitors = await Promise.all(
    redis.nodes.map(
      (node) =>
        new Promise<{ port: number; child: ChildProcess; ended: Promise<void> }>((resolve, reject) => {
          const child = spawn("redis-cli", ["-p", String(node.port), "monitor"], {
            stdio: ["ignore", "pipe", "ignore"],
          });
          let pending = "";
          let started = false;
          let end!: () => void;
          const ended = new Promise<void>((r) => {
            end = r;
          });
          child.once("error", reject);
          child.stdout!.on("data", (chunk: Buffer) => {
            pending += chunk.toString();
            const lines = pending.split("\n");
            pending = lines.pop()!;
            for (const line of lines) {
              if (!started) {
                started = line.trim() === "OK";
                if (started) resolve({ port: node.port, child, ended });
                continue;
              }
              const args = [...line.matchAll(/"((?:[^"\\]|\\.)*)"/g)].map((m) => m[1]!);
              if (args[0]?.toLowerCase() === "echo" && args[1] === marker) end();
              else if (args.length > 0) commands.push([args[0]!.toLowerCase(), ...args.slice(1)]);
            }
          });
        }),
    ),
  );
  return {
    commands,
    async stop() {
      await Promise.all(
        monitors.map(async ({ port, child, ended }) => {
          await runRedisCli(["-p", String(port), "echo", marker]);
          await ended;
          child.kill();
        }),
      );
    },
  };
}

async function distinctFreePorts(count: number): Promise<number[]> {
  const ports = new Set<number>();
  while (ports.size < count) ports.add(await freePort());
  return [...ports];
}

async function runRedisCli(args: string[]): Promise<string> {
  try {
    const { stdout } = await execFileAsync("redis-cli", args, { timeout: 30_000 });
    return stdout;
  } catch (err) {
    const { code, stdout, stderr } = err as { code?: string; stdout?: string; stderr?: string };
    if (code === "ENOENT")
      throw new Error("could not run redis-cli (install it: apt-get install -y redis-tools)");
    throw new Error(`redis-cli ${args.join(" ")} failed: ${stderr || stdout || String(err)}`);
  }
}

/**
 * Joins fresh cluster-enabled servers into one cluster of masters, as `redis-cli --cluster create
 * --cluster-replicas 0` does: each takes an equal range of the 16384 slots and a config epoch of its own,
 * then the first meets the others (on their cluster bus ports). `redis-cli` then pauses a whole second
 * between its checks that the cluster joined; `untilClusterServes` asks every 20 ms.
 */
async function joinCluster(nodes: { port: number; busPort: number }[]): Promise<void> {
  const clients = nodes.map(({ port }) => testRedisClient(`redis://127.0.0.1:${port}`));
  try {
    const share = Math.ceil(16384 / nodes.length);
    await Promise.all(
      clients.map(async (client, i) => {
        await client.call("CLUSTER", "ADDSLOTSRANGE", i * share, Math.min(16383, (i + 1) * share - 1));
        await client.call("CLUSTER", "SET-CONFIG-EPOCH", i + 1);
      }),
    );
    await Promise.all(
      nodes
        .slice(1)
        .map(({ port, busPort }) => clients[0]!.call("CLUSTER", "MEET", "127.0.0.1", port, busPort)),
    );
  } finally {
    for (const client of clients) client.disconnect();
  }
}

/** Waits until every node reports the cluster healthy with all 16384 slots served and every node known. */
async function untilClusterServes(ports: number[], timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last = "";
  // One connection per node, asked over and over (a redis-cli per question would be a process each time).
  const clients = ports.map((port) => testRedisClient(`redis://127.0.0.1:${port}`));
  try {
    while (Date.now() < deadline) {
      const infos = await Promise.all(
        clients.map((client) => client.call("CLUSTER", "INFO").then(String, () => "")),
      );
      if (
        infos.every(
          (info) =>
            /cluster_state:ok/.test(info) &&
            /cluster_slots_ok:16384/.test(info) &&
            new RegExp(`cluster_known_nodes:${ports.length}\\b`).test(info),
        )
      )
        return;
      last = infos.join("\n");
      await new Promise((r) => setTimeout(r, 20));
    }
  } finally {
    for (const client of clients) client.disconnect();
  }
  throw new Error(`the test Redis Cluster did not come up within ${timeoutMs} ms:\n${last}`);
}

/** A test file's own database on the run's PostgreSQL (see `postgres-global-setup.ts`). */
export interface TestDatabase {
  /** What `DATABASE_URL` says to reach it. */
  url: string;
  name: string;
  /** The server's port, e.g. to point a process at a database of its own. */
  port: number;
  drop(): Promise<void>;
}

/** Runs `use` with a client connected to `url`, then closes it. */
async function withClient<T>(url: string, use: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url });
  client.on("error", () => {});
  await client.connect();
  try {
    return await use(client);
  } finally {
    await client.end();
  }
}

async function adminQuery(port: number, sql: string): Promise<void> {
  await withClient(localServerUrl(port, "postgres"), (client) => client.query(sql));
}

/**
 * A fresh database on the run's PostgreSQL: a copy of the migrated template
 * (every migration applied), or an empty one with `migrated: false`. Its name
 * is random, so files and tests never share rows.
 */
export async function createTestDatabase(options: { migrated?: boolean } = {}): Promise<TestDatabase> {
  const port = inject("postgresPort");
  if (!port)
    throw new Error(
      "no test PostgreSQL: run the tests through vitest.config.ts (its globalSetup starts one)",
    );
  const name = `test_${randomBytes(6).toString("hex")}`;
  const template = options.migrated === false ? "template0" : MIGRATED_TEMPLATE;
  // Identifiers cannot be parameters; both names are ours, made of [a-z0-9_].
  await adminQuery(port, `CREATE DATABASE ${name} TEMPLATE ${template}`);
  return {
    url: localServerUrl(port, name),
    name,
    port,
    drop: () => adminQuery(port, `DROP DATABASE IF EXISTS ${name} WITH (FORCE)`),
  };
}

/** A PostgreSQL server of a test's own, to stop and start again (an outage) without touching the run's. */
export interface StoppablePostgres {
  /** Its `gateway` database. */
  url: string;
  stop(): Promise<void>;
  /** Starts it again, on the same port with the same data. */
  start(): Promise<void>;
  /** Stops it if running and deletes its data. */
  remove(): Promise<void>;
}

/** Starts a PostgreSQL server of the test's own (empty: the processes migrate it), on a free port. */
export async function startStoppablePostgres(): Promise<StoppablePostgres> {
  const root = await mkdtemp(join(tmpdir(), "gw-test-postgres-own-"));
  const options = { port: await freePort(), dir: join(root, "data"), ephemeral: true };
  let server: RunningPostgres | undefined = await startPostgresServer(options);
  const url = server.url;
  return {
    url,
    async stop() {
      await server?.stop();
      server = undefined;
    },
    async start() {
      server ??= await startPostgresServer(options);
    },
    async remove() {
      await server?.stop();
      server = undefined;
      await rm(root, { recursive: true, force: true });
    },
  };
}

/** Migrated databases that a file of this worker emptied and gave back, for the next file (files share workers). */
const spareDatabases: TestDatabase[] = [];
/** The columns of a freshly migrated database, to tell a database whose schema a test changed. */
let migratedShape: string | undefined;

/** Every column of every table, with its type and default, as one text. */
async function schemaShape(client: pg.Client): Promise<string> {
  const { rows } = await client.query<{ shape: string }>(
    `SELECT string_agg(table_name || '.' || column_name || ' ' || data_type || ' ' || coalesce(column_default, ''),
                       ',' ORDER BY table_name, ordinal_position) AS shape
       FROM information_schema.columns WHERE table_schema = 'public'`,
  );
  return rows[0]?.shape ?? "";
}

/**
 * Makes a migrated database as a fresh copy of the template is, for the next
 * file: its other sessions ended (as `DROP DATABASE … WITH (FORCE)` would),
 * every table but `schema_migrations` emptied and its sequences restarted.
 * False if its schema is not the template's any more (a test changed it).
 * A fifth of the time a new copy takes (`CREATE DATABASE` copies every file).
 */
async function emptyForReuse(database: TestDatabase): Promise<boolean> {
  return withClient(database.url, async (client) => {
    await client.query("SET lock_timeout = '5s'");
    await client.query(
      "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()",
    );
    if ((await schemaShape(client)) !== migratedShape) return false;
    const { rows } = await client.query<{ name: string }>(
      "SELECT quote_ident(tablename) AS name FROM pg_tables WHERE schemaname = 'public' AND tablename <> 'schema_migrations'",
    );
    if (rows.length > 0)
      await client.query(`TRUNCATE ${rows.map((r) => r.name).join(", ")} RESTART IDENTITY CASCADE`);
    return true;
  });
}

/**
 * Per `describe` block (or file): a database of its own, as a fresh copy of
 * the migrated template (see `createTestDatabase`) or, with `migrated: false`,
 * an empty one. A migrated one is emptied afterwards and handed to a later
 * file of the same worker (dropped instead if emptying fails or its schema
 * changed); an empty one is dropped.
 */
export function useTestDatabase(options: { migrated?: boolean } = {}): TestDatabase {
  const migrated = options.migrated !== false;
  const holder = {} as TestDatabase;
  beforeAll(async () => {
    const spare = migrated ? spareDatabases.pop() : undefined;
    if (spare) return void Object.assign(holder, spare);
    Object.assign(holder, await createTestDatabase(options));
    if (migrated) migratedShape ??= await withClient(holder.url, schemaShape);
  });
  afterAll(async () => {
    if (!holder.drop) return;
    const reusable = migrated && (await emptyForReuse(holder).catch(() => false));
    if (reusable) spareDatabases.push({ ...holder });
    else await holder.drop();
  });
  return holder;
}

/** A vector database of a test's own: PGlite with pgvector's own code, in a process of its own, in memory. */
export interface TestVectorDatabase {
  /** What VECTOR_DATABASE_URL says to reach it. */
  url: string;
  port: number;
  /** Its process, e.g. to kill it (an outage). */
  process: ChildProcess;
  stop(): Promise<void>;
}

/**
 * Starts the local vector database (devstack's `vector-database-main.ts`, as
 * `pnpm start` runs it) in memory on a port it picks, from a dump of a new
 * cluster kept in the system's temporary directory (about a second; the first
 * start on a machine makes the dump, several), with the vector migrations
 * applied unless `migrated: false`. For a test that stops or kills it; the
 * others share their worker's (`useTestVectorDatabase`).
 */
export async function startTestVectorDatabase(
  options: { migrated?: boolean } = {},
): Promise<TestVectorDatabase> {
  const running = await startVectorDatabaseProcess({
    port: 0,
    env: process.env,
    inMemory: true,
    templateFile: vectorDatabaseTemplateFile(),
  });
  try {
    if (options.migrated !== false) await migrateVectorDatabase(running.databaseUrl);
  } catch (err) {
    await running.stop();
    throw err;
  }
  return { url: running.databaseUrl, port: running.port, process: running.process, stop: running.stop };
}

/** The worker's vector database: started by the first file of the worker that asks. */
let workerVectorDatabase: Promise<TestVectorDatabase> | undefined;

/**
 * The test worker's vector database (see `startTestVectorDatabase`), migrated,
 * started the first time one of its files asks and shared by the worker's
 * files one after another (a worker runs one file at a time), as the run's
 * PostgreSQL is shared: each file keeps to organizations of its own (fresh
 * ids), so none sees another's chunks. It stops when the worker exits (its
 * process is tied to the worker's), and holds nothing that keeps the worker alive.
 */
export function workerTestVectorDatabase(): Promise<Pick<TestVectorDatabase, "url" | "port">> {
  workerVectorDatabase ??= startTestVectorDatabase().then(
    (database) => {
      const child = database.process;
      child.unref();
      child.channel?.unref();
      for (const stream of [child.stdout, child.stderr]) (stream as { unref?: () => void } | null)?.unref?.();
      return database;
    },
    (err: unknown) => {
      workerVectorDatabase = undefined;
      throw err;
    },
  );
  return workerVectorDatabase.then(({ url, port }) => ({ url, port }));
}

/** Per `describe` block (or file): the worker's vector database (`workerTestVectorDatabase`), its URL and port. */
export function useTestVectorDatabase(): Pick<TestVectorDatabase, "url" | "port"> {
  const holder = {} as Pick<TestVectorDatabase, "url" | "port">;
  beforeAll(async () => {
    Object.assign(holder, await workerTestVectorDatabase());
  });
  return holder;
}

/**
 * A gateway as a separate OS process, for tests that need several replicas.
 * Its data directory (the development signing key) is `env.DATA_DIR` or a
 * fresh temporary one; its PostgreSQL database `env.DATABASE_URL` or a fresh
 * one (dropped with the run's server).
 */
export async function startGatewayProcess(env: NodeJS.ProcessEnv): Promise<RunningNodeProcess> {
  const dataDir = env.DATA_DIR ?? (await mkdtemp(join(tmpdir(), "gw-test-data-")));
  const databaseUrl = env.DATABASE_URL ?? (await createTestDatabase()).url;
  // Never the defaults (a `pnpm start` may be serving them): what a test gives, else a port that answers nothing.
  const nothing = await startNothingListener();
  const noSpiceDB = {
    SPICEDB_ENDPOINT: nothing.address,
    SPICEDB_PRESHARED_KEY: "no-spicedb-here",
    SPICEDB_INSECURE: "true",
  };
  try {
    const gateway = await startNodeProcess({
      name: "gateway",
      entry: "packages/gateway/src/main.ts",
      port: 0,
      env: {
        PATH: process.env.PATH,
        HOST: "127.0.0.1",
        LOG_LEVEL: "warn",
        DATA_DIR: dataDir,
        SERVICE_URL: nothing.url,
        DATABASE_URL: databaseUrl,
        ...(env.SPICEDB_ENDPOINT ? {} : noSpiceDB),
        ...env,
      },
    });
    return {
      ...gateway,
      async stop() {
        await gateway.stop();
        await nothing.close();
      },
    };
  } catch (err) {
    await nothing.close();
    throw err;
  }
}

/**
 * A port of the test's own that drops every connection: where a process is
 * pointed when a test needs no service or SpiceDB behind it, rather than the
 * default ports, which a `pnpm start` on the same machine may be serving.
 */
export async function startNothingListener(): Promise<{
  url: string;
  address: string;
  close(): Promise<void>;
}> {
  const server = createServer((socket) => socket.destroy());
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  return {
    url: `http://127.0.0.1:${port}`,
    address: `127.0.0.1:${port}`,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/** Whether a TCP connection to `port` of `host` is accepted. */
export function acceptsConnections(port: number, host = "127.0.0.1"): Promise<boolean> {
  return new Promise((answer) => {
    const socket = createConnection({ host, port });
    socket.once("connect", () => {
      socket.destroy();
      answer(true);
    });
    socket.once("error", () => answer(false));
  });
}

/** Whether a process still runs: it exists and is not a zombie waiting to be reaped. */
export function processRunning(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  try {
    return !/^\d+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, "utf8"));
  } catch {
    return false;
  }
}

/** The pids still running once every one of them has exited, or `timeoutMs` has run out. */
export async function survivors(pids: readonly number[], timeoutMs = 20_000): Promise<number[]> {
  const deadline = Date.now() + timeoutMs;
  while (pids.some(processRunning) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
  return pids.filter(processRunning);
}

/** The environment that points a gateway or service at a test SpiceDB. */
export function spicedbEnv(spicedb: { endpoint: string; presharedKey: string }): Record<string, string> {
  return {
    SPICEDB_ENDPOINT: spicedb.endpoint,
    SPICEDB_PRESHARED_KEY: spicedb.presharedKey,
    SPICEDB_INSECURE: "true",
  };
}

/**
 * The relationships matching `filter`, read fully consistently through the
 * stock client, as `zed relationship read` shows them: `relation subject-id`, sorted.
 */
export async function readRelationshipLines(
  spicedb: { endpoint: string; presharedKey: string },
  filter: { resourceType: string; optionalResourceId?: string; optionalResourceIdPrefix?: string },
): Promise<string[]> {
  const zed = v1.NewClient(
    spicedb.presharedKey,
    spicedb.endpoint,
    v1.ClientSecurity.INSECURE_PLAINTEXT_CREDENTIALS,
  );
  try {
    const read = await zed.promises.readRelationships(
      v1.ReadRelationshipsRequest.create({
        consistency: v1.Consistency.create({
          requirement: { oneofKind: "fullyConsistent", fullyConsistent: true },
        }),
        relationshipFilter: v1.RelationshipFilter.create(filter),
      }),
    );
    return read.map(({ relationship: r }) => `${r?.relation} ${r?.subject?.object?.objectId}`).sort();
  } finally {
    zed.close();
  }
}

/** A logger whose JSON lines land in `lines`, for tests that check what is (or is never) logged. */
export function capturingLogger(level = "info", lines: string[] = []): { logger: Logger; lines: string[] } {
  const sink = new Writable({
    write(chunk, _encoding, done) {
      lines.push(String(chunk));
      done();
    },
  });
  return { logger: createLogger("test", level, sink), lines };
}

/**
 * Asserts that a response is a catalogue error: `status`, a JSON body, and
 * nothing of a stack trace or another system's internals in it. Returns the body.
 */
export async function expectJsonError(res: Response, status: number): Promise<Record<string, unknown>> {
  const { expect } = await import("vitest");
  expect(res.status).toBe(status);
  expect(res.headers.get("content-type")).toBe("application/json; charset=utf-8");
  const body = (await res.json()) as Record<string, unknown>;
  expect(JSON.stringify(body)).not.toMatch(/RangeError|at .*\.(ts|js)|node_modules/);
  return body;
}
