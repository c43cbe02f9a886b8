import { type ChildProcess, execFile } from "node:child_process";
import { existsSync } from "node:fs";
import { chmod, chown, mkdir, readdir, stat } from "node:fs/promises";
import { dirname, join } from "node:path";
import { promisify } from "node:util";
import { LOCAL_POSTGRES_DATABASE, LOCAL_POSTGRES_USER } from "@gw/core/postgres";
import pg from "pg";
import { stopProcess } from "./redis-server.ts";
import { spawnStackChild } from "./stack-child.ts";

const run = promisify(execFile);
const INSTALL_HINT = "install it: apt-get install -y postgresql";

export interface PostgresServerOptions {
  port: number;
  /** The cluster's data directory (`initdb` fills it on first start); its unix socket goes there too. */
  dir: string;
  /** Tests: no fsync, no synchronous commit. Never for data that must survive a crash. */
  ephemeral?: boolean;
}

export interface RunningPostgres {
  /** The `gateway` database, as the processes reach it (`DATABASE_URL`). */
  url: string;
  /** A URL for any other database of this server, as the `gateway` superuser. */
  urlOf(database: string): string;
  port: number;
  process: ChildProcess;
  /** The server's last output, for errors. */
  output(): string;
  /** Fast shutdown (SIGINT: open transactions roll back, committed ones are on disk), SIGKILL if it lingers. */
  stop(): Promise<void>;
}

/** A database of a server that `startPostgresServer` runs, as its superuser. */
export function localServerUrl(port: number, database: string): string {
  return `postgres://${LOCAL_POSTGRES_USER}@127.0.0.1:${port}/${encodeURIComponent(database)}`;
}

/** Where Debian's PostgreSQL binaries are: `pg_config --bindir`, else the newest `/usr/lib/postgresql/<version>/bin`. */
export async function postgresBinDir(): Promise<string> {
  try {
    const { stdout } = await run("pg_config", ["--bindir"]);
    const dir = stdout.trim();
    if (existsSync(join(dir, "initdb")) && existsSync(join(dir, "postgres"))) return dir;
  } catch {
    // not installed, or only the client package: look where Debian puts the server
  }
  const root = "/usr/lib/postgresql";
  const versions = existsSync(root)
    ? (await readdir(root)).filter((v) => existsSync(join(root, v, "bin", "initdb")))
    : [];
  versions.sort((a, b) => Number(b) - Number(a));
  if (versions.length === 0)
    throw new Error(`could not find PostgreSQL's initdb and postgres (${INSTALL_HINT})`);
  return join(root, versions[0]!, "bin");
}

/** PostgreSQL refuses to run as root: as root, run it as the `postgres` user that Debian's package creates. */
async function serverUser(): Promise<{ uid: number; gid: number } | undefined> {
  if (process.getuid?.() !== 0) return undefined;
  try {
    const [uid, gid] = await Promise.all([run("id", ["-u", "postgres"]), run("id", ["-g", "postgres"])]);
    return { uid: Number(uid.stdout.trim()), gid: Number(gid.stdout.trim()) };
  } catch {
    throw new Error(
      `running as root, but there is no 'postgres' user to run PostgreSQL as (${INSTALL_HINT})`,
    );
  }
}

/**
 * Runs Debian's PostgreSQL on 127.0.0.1:`port` (unix socket in `dir`), first
 * creating the cluster with `initdb` if `dir` has none (superuser `gateway`,
 * trust authentication: reachable only from this machine) and the `gateway`
 * database if missing, and resolves once it accepts connections. Used by
 * `pnpm start` (data under `.data/postgres`) and the test harness.
 */
export async function startPostgresServer(options: PostgresServerOptions): Promise<RunningPostgres> {
  const bin = await postgresBinDir();
  const user = await serverUser();
  const asUser = user ? { uid: user.uid, gid: user.gid } : {};
  await mkdir(options.dir, { recursive: true, mode: 0o700 });
  if (user) {
    await chown(options.dir, user.uid, user.gid);
    // The server must pass through the data directory's parent (DATA_DIR): traverse only, no listing.
    const parent = await stat(dirname(options.dir));
    if (parent.uid === 0 && !(parent.mode & 0o001))
      await chmod(dirname(options.dir), (parent.mode & 0o7777) | 0o001);
  }

  if (!existsSync(join(options.dir, "PG_VERSION"))) {
    try {
      await run(
        join(bin, "initdb"),
        [
          "-D",
          options.dir,
          "-U",
          LOCAL_POSTGRES_USER,
          "--auth=trust",
          "--encoding=UTF8",
          "--locale=C",
          ...(options.ephemeral ? ["--no-sync"] : []),
        ],
        { ...asUser, env: { PATH: process.env.PATH, LANG: "C" } },
      );
    } catch (err) {
      const stderr = (err as { stderr?: string }).stderr || String(err);
      const hint = /Permission denied/.test(stderr)
        ? ` (the 'postgres' user must be able to pass through every directory above ${options.dir})`
        : "";
      throw new Error(`initdb of ${options.dir} failed: ${stderr.trim()}${hint}`);
    }
  }

  const args = [
    "-D",
    options.dir,
    "-p",
    String(options.port),
    "-h",
    "127.0.0.1",
    "-k",
    options.dir,
    "-c",
    "max_connections=200",
    ...(options.ephemeral
      ? ["-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off"]
      : []),
  ];
  const child = spawnStackChild(join(bin, "postgres"), args, {
    ...asUser,
    env: { PATH: process.env.PATH, LANG: "C" },
    stdio: ["ignore", "ignore", "pipe"],
  });
  let output = "";
  child.stderr?.on("data", (chunk: Buffer) => {
    output = (output + chunk.toString()).slice(-8_192);
  });
  const exited = new Promise<never>((_, reject) => {
    child.once("error", (err) =>
      reject(new Error(`could not run postgres (${INSTALL_HINT}): ${err.message}`)),
    );
    child.once("exit", (code) => reject(new Error(`postgres exited with code ${code}: ${output.trim()}`)));
  });
  exited.catch(() => {});
  const urlOf = (database: string) => localServerUrl(options.port, database);
  const stop = () => stopProcess(child, 10_000, "SIGINT");
  try {
    await Promise.race([untilAccepting(urlOf("postgres"), 20_000), exited]);
    await Promise.race([ensureDatabase(urlOf("postgres"), LOCAL_POSTGRES_DATABASE), exited]);
  } catch (err) {
    await stop();
    throw err;
  }
  return {
    url: urlOf(LOCAL_POSTGRES_DATABASE),
    urlOf,
    port: options.port,
    process: child,
    output: () => output,
    stop,
  };
}

/** Waits until the server accepts a connection (it refuses them while starting up). */
async function untilAccepting(url: string, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  while (Date.now() < deadline) {
    const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 1_000 });
    client.on("error", () => {});
    try {
      await client.connect();
      await client.end();
      return;
    } catch (err) {
      last = err;
      await client.end().catch(() => {});
      await new Promise((r) => setTimeout(r, 50));
    }
  }
  throw new Error(`postgres did not accept connections within ${timeoutMs} ms: ${String(last)}`);
}

/** Creates `database` unless it exists. */
export async function ensureDatabase(adminUrl: string, database: string): Promise<void> {
  const client = new pg.Client({ connectionString: adminUrl });
  client.on("error", () => {});
  await client.connect();
  try {
    const found = await client.query("SELECT 1 FROM pg_database WHERE datname = $1", [database]);
    // CREATE DATABASE takes no parameters: the name is quoted as an identifier instead.
    if (found.rowCount === 0) await client.query(`CREATE DATABASE ${client.escapeIdentifier(database)}`);
  } finally {
    await client.end();
  }
}
