import { readdir, readFile } from "node:fs/promises";
import { join } from "node:path";
import pg from "pg";
import { withDeadline } from "./deadline.ts";
import { AppError } from "./errors.ts";
import { type Logger, redactUrl } from "./logger.ts";
import { endSpan, startClientSpan, tracingEnabled } from "./tracing.ts";

/** Default port of the PostgreSQL that `pnpm start` runs when `DATABASE_URL` is unset (not 5432: a system server may hold it). */
export const DEFAULT_LOCAL_POSTGRES_PORT = 5433;
/** Role and database of the local PostgreSQL that `pnpm start` and the tests run. */
export const LOCAL_POSTGRES_USER = "gateway";
export const LOCAL_POSTGRES_DATABASE = "gateway";

/** The local PostgreSQL's port: `LOCAL_POSTGRES_PORT`, else 5433. */
export function localPostgresPort(env: NodeJS.ProcessEnv = process.env): number {
  const port = Number(env.LOCAL_POSTGRES_PORT || DEFAULT_LOCAL_POSTGRES_PORT);
  if (!Number.isInteger(port) || port < 1 || port > 65535)
    throw new Error("LOCAL_POSTGRES_PORT must be a TCP port");
  return port;
}

/** Where the gateway and the service find PostgreSQL when `DATABASE_URL` is unset. */
export function localDatabaseUrl(env: NodeJS.ProcessEnv = process.env): string {
  return `postgres://${LOCAL_POSTGRES_USER}@127.0.0.1:${localPostgresPort(env)}/${LOCAL_POSTGRES_DATABASE}`;
}

/** PostgreSQL could not be asked (connection refused or lost, a deadline passed, the server shutting down): a 503, whoever asked. */
export class PostgresUnavailable extends AppError {
  constructor(cause: unknown) {
    super("service_unavailable", "The data store is unavailable; try again", {
      cause,
      reason: "data_store_unavailable",
    });
    this.name = "PostgresUnavailable";
  }
}

/**
 * SQLSTATE classes and codes that mean the server cannot answer right now
 * rather than that we asked wrong: connection exceptions (08), insufficient
 * resources (53), operator intervention such as shutdown or a cancelled
 * statement (57), lock timeouts (55P03), system errors (58), and transaction
 * rollbacks the client may retry (40001 serialization, 40P01 deadlock).
 */
const UNAVAILABLE_SQLSTATE = /^(08|53|57|58|55P03|40001|40P01)/;

/** pg's own errors when the connection is gone or a deadline passed (they carry no SQLSTATE). */
const UNAVAILABLE_CLIENT_ERROR =
  /timeout|Connection terminated|not queryable|Client was closed|connection error|Cannot use a pool after calling end/i;
/** Socket errors: the server cannot be reached. */
const UNAVAILABLE_SOCKET_ERROR =
  /^(ECONNREFUSED|ECONNRESET|ETIMEDOUT|EPIPE|ENOTFOUND|EAI_AGAIN|EHOSTUNREACH|ENETUNREACH|ENOENT)$/;

/**
 * Whether PostgreSQL's `text` can hold the string: it cannot hold U+0000 (a
 * parameter carrying one is refused, SQLSTATE 22021). No key the services
 * store holds one, so a lookup by such a string finds nothing: stores answer
 * it as an unknown id instead of sending it.
 */
export const postgresCanHold = (text: string): boolean => !text.includes("\u0000");

/** Whether an error says PostgreSQL could not answer (rather than refusing what was asked: a bug of ours, or a constraint a caller handles). */
export function isPostgresOutage(err: unknown): boolean {
  if (err instanceof PostgresUnavailable) return true;
  if (err instanceof pg.DatabaseError) return UNAVAILABLE_SQLSTATE.test(err.code ?? "");
  const code = (err as { code?: unknown } | null)?.code;
  if (typeof code === "string" && UNAVAILABLE_SOCKET_ERROR.test(code)) return true;
  return err instanceof Error && UNAVAILABLE_CLIENT_ERROR.test(err.message);
}

function guard(err: unknown): unknown {
  return isPostgresOutage(err) && !(err instanceof PostgresUnavailable) ? new PostgresUnavailable(err) : err;
}

/** What a query may be sent to: the pool, or the connection of one transaction. */
export interface Queryable {
  /** One parameterized statement; `values` fill `$1`, `$2`… (never interpolate them into `text`). */
  query<R extends pg.QueryResultRow = Record<string, unknown>>(
    text: string,
    values?: unknown[],
  ): Promise<pg.QueryResult<R>>;
}

/** Where statement latency and errors go (see `createMetrics`); one per process. */
export interface PostgresQueryObserver {
  /** A new pool: its error counts start at 0. */
  track(client: string): void;
  /** Called once per statement, when it settles; `error` tells an outage from PostgreSQL's own refusal. */
  observe(client: string, seconds: number, error?: "unavailable" | "refused"): void;
}

export interface PostgresOptions {
  /** `application_name`, shown in `pg_stat_activity`, so an operator can tell the connections apart. */
  connectionName: string;
  /** Connections kept at most. Default 10. */
  maxConnections?: number;
  /** Time allowed to obtain a connection (new or from the pool), in milliseconds. Default 5000. */
  connectTimeoutMs?: number;
  /** Server-side limit on one statement, in milliseconds (`statement_timeout`). Default 5000. */
  statementTimeoutMs?: number;
  /** Client-side limit on one query's answer, in milliseconds, for a server that no longer answers at all. Default statement timeout + 1000. */
  queryTimeoutMs?: number;
  /** Idle connections are closed after this many milliseconds. Default 30000. */
  idleTimeoutMs?: number;
  /** Statement latency and errors. */
  metrics?: PostgresQueryObserver;
  /** Called with errors of idle connections (a restarted server); they are dropped from the pool either way. */
  onIdleError?: (err: Error) => void;
}

/**
 * The one PostgreSQL client of every process: a pool with deadlines on
 * connecting, on each statement (server side) and on each answer (client
 * side), so a dead or hung server fails a request instead of hanging it.
 * Outages reject with `PostgresUnavailable` (a 503 wherever it strikes);
 * PostgreSQL's own errors (a unique violation…) pass unchanged.
 */
export class Postgres implements Queryable {
  readonly pool: pg.Pool;
  private readonly observe: <T>(statement: () => Promise<T>, text: string) => Promise<T>;

  constructor(url: string, options: PostgresOptions) {
    const statementTimeout = options.statementTimeoutMs ?? 5_000;
    this.pool = new pg.Pool({
      connectionString: url,
      application_name: options.connectionName,
      max: options.maxConnections ?? 10,
      connectionTimeoutMillis: options.connectTimeoutMs ?? 5_000,
      idleTimeoutMillis: options.idleTimeoutMs ?? 30_000,
      statement_timeout: statementTimeout,
      query_timeout: options.queryTimeoutMs ?? statementTimeout + 1_000,
      lock_timeout: statementTimeout,
      // A transaction left open by a crashed request must not hold its locks for long.
      idle_in_transaction_session_timeout: Math.max(10_000, statementTimeout * 2),
      keepAlive: true,
    });
    // Without a listener, an idle connection's error (the server restarting) would crash the process.
    this.pool.on("error", (err) => options.onIdleError?.(err));
    const metrics = options.metrics;
    metrics?.track(options.connectionName);
    // Every statement's settlement: outages become PostgresUnavailable, and latency and errors reach `metrics`.
    this.observe = async (statement, text) => {
      const started = process.hrtime.bigint();
      const seconds = () => Number(process.hrtime.bigint() - started) / 1e9;
      // A span per statement when tracing is on: its operation, never its values.
      const span = tracingEnabled()
        ? startClientSpan(`PostgreSQL ${operationOf(text)}`, {
            "db.system.name": "postgresql",
            "db.operation.name": operationOf(text),
          })
        : undefined;
      try {
        const result = await statement();
        endSpan(span);
        metrics?.observe(options.connectionName, seconds());
        return result;
      } catch (err) {
        const mapped = guard(err);
        endSpan(span, mapped);
        metrics?.observe(
          options.connectionName,
          seconds(),
          mapped instanceof PostgresUnavailable ? "unavailable" : "refused",
        );
        throw mapped;
      }
    };
  }

  async query<R extends pg.QueryResultRow = Record<string, unknown>>(
    text: string,
    values?: unknown[],
  ): Promise<pg.QueryResult<R>> {
    return this.observe(() => this.pool.query<R>(text, values), text);
  }

  /**
   * Runs `work` in one transaction on one connection: committed if it
   * resolves, rolled back if it throws, so nothing is half-written. A
   * connection that failed is discarded rather than returned to the pool.
   */
  async transaction<T>(work: (tx: Queryable) => Promise<T>): Promise<T> {
    let client: pg.PoolClient;
    try {
      client = await this.pool.connect();
    } catch (err) {
      throw guard(err);
    }
    const tx: Queryable = {
      query: (text, values) => this.observe(() => client.query(text, values), text),
    };
    try {
      await tx.query("BEGIN");
      const result = await work(tx);
      await tx.query("COMMIT");
      client.release();
      return result;
    } catch (err) {
      // Every error of this connection went through `guard`: an outage means the connection is unusable.
      const broken = err instanceof PostgresUnavailable;
      try {
        if (!broken) await client.query("ROLLBACK");
        client.release(broken);
      } catch (rollbackError) {
        client.release(rollbackError as Error);
      }
      throw err;
    }
  }

  /**
   * Runs `work` only if no other session (of any process) holds the advisory
   * lock `key`, holding it meanwhile on a connection of its own; `undefined`
   * when another holds it. A crashed holder's lock goes with its session.
   * For jobs every replica schedules but one at a time should run (sweeps).
   */
  async withAdvisoryLock<T>(key: number, work: () => Promise<T>): Promise<T | undefined> {
    let client: pg.PoolClient;
    try {
      client = await this.pool.connect();
    } catch (err) {
      throw guard(err);
    }
    let broken = false;
    try {
      const { rows } = await client.query<{ locked: boolean }>("SELECT pg_try_advisory_lock($1) AS locked", [
        key,
      ]);
      if (!rows[0]?.locked) return undefined;
      try {
        return await work();
      } finally {
        await client.query("SELECT pg_advisory_unlock($1)", [key]);
      }
    } catch (err) {
      broken = isPostgresOutage(err);
      throw guard(err);
    } finally {
      client.release(broken);
    }
  }

  async close(): Promise<void> {
    await this.pool.end();
  }
}

/** The pool of every process, with its deadlines. */
export function createPostgres(url: string, options: PostgresOptions): Postgres {
  return new Postgres(url, options);
}

/** `SELECT 1` with a deadline: the readiness probe. */
export async function postgresReady(db: Queryable, timeoutMs = 1_000): Promise<boolean> {
  try {
    const result = await withDeadline(db.query("SELECT 1 AS ok"), timeoutMs, () => new Error("timeout"));
    return result.rows[0]?.ok === 1;
  } catch {
    return false;
  }
}

/** The repository's migrations: `packages/core/migrations/*.sql`, applied in the order of their names. */
export const MIGRATIONS_DIR = join(import.meta.dirname, "..", "migrations");

/**
 * The vector database's migrations (`packages/core/vector-migrations`): apart
 * from the content's, since they need pgvector and may go to another server
 * (docs/adr/0020-vector-engine.md).
 */
export const VECTOR_MIGRATIONS_DIR = join(import.meta.dirname, "..", "vector-migrations");

/** Brings the vector database (`VECTOR_DATABASE_URL`) up to date: `migrate` with the vector migrations. */
export function migrateVectorDatabase(url: string): Promise<string[]> {
  return migrate(url, VECTOR_MIGRATIONS_DIR);
}

/** Pauses between attempts to reach PostgreSQL at start-up: growing to 5 s, then every 5 s. */
const START_PAUSES_MS = [250, 500, 1_000, 2_000, 5_000];

/**
 * `migrate` at a process's start: while PostgreSQL cannot be reached (not
 * started yet, restarting), tries again after a pause, saying so at each
 * attempt (where, without credentials; why; when it tries next) instead of
 * ending the process with a stack trace. A deployment whose database comes
 * up after it then starts once it does, as it does for Redis. Anything else
 * (a migration that fails) is thrown as before. The migrations it applied are
 * logged, and returned.
 */
export async function migrateWhenReachable(
  url: string,
  logger: Pick<Logger, "warn" | "info">,
  options: { dir?: string; pausesMs?: readonly number[] } = {},
): Promise<string[]> {
  const pauses = options.pausesMs ?? START_PAUSES_MS;
  for (let attempt = 0; ; attempt++) {
    try {
      const applied = await migrate(url, options.dir);
      if (applied.length > 0) logger.info({ applied }, "database migrations applied");
      return applied;
    } catch (err) {
      if (!(err instanceof PostgresUnavailable)) throw err;
      const retryInMs = pauses[Math.min(attempt, pauses.length - 1)]!;
      const reason = err.cause instanceof Error ? err.cause.message : String(err.cause);
      logger.warn(
        { database: redactUrl(url), reason, retryInMs },
        "PostgreSQL cannot be reached yet: waiting for it before starting",
      );
      await new Promise((resolve) => setTimeout(resolve, retryInMs));
    }
  }
}

/** Key of the advisory lock that lets one process at a time migrate a database ("gw:migrations"). */
const MIGRATION_LOCK = 0x67773a6d;

/**
 * Brings the database's schema up to date: every `.sql` file of `dir` not yet
 * recorded in `schema_migrations` is applied, in the order of the file names,
 * each in its own transaction with its record. One process at a time: the
 * others wait on an advisory lock, then find nothing left to do. A file is
 * applied whenever it is missing, not only when it sorts after the last one
 * applied, so migrations added on branches merged in any order all run.
 * Uses its own connection without statement deadlines (a migration may take
 * a while). Returns the versions it applied.
 */
export async function migrate(url: string, dir = MIGRATIONS_DIR): Promise<string[]> {
  const files = (await readdir(dir)).filter((f) => f.endsWith(".sql")).sort();
  const client = new pg.Client({
    connectionString: url,
    application_name: "migrations",
    connectionTimeoutMillis: 10_000,
  });
  client.on("error", () => {});
  try {
    await client.connect();
  } catch (err) {
    throw guard(err);
  }
  try {
    await client.query("SELECT pg_advisory_lock($1)", [MIGRATION_LOCK]);
    await client.query(
      `CREATE TABLE IF NOT EXISTS schema_migrations (
         version text PRIMARY KEY,
         applied_at timestamptz NOT NULL DEFAULT now()
       )`,
    );
    const done = new Set(
      (await client.query<{ version: string }>("SELECT version FROM schema_migrations")).rows.map(
        (r) => r.version,
      ),
    );
    const applied: string[] = [];
    for (const file of files) {
      const version = file.replace(/\.sql$/, "");
      if (done.has(version)) continue;
      const sql = await readFile(join(dir, file), "utf8");
      try {
        await client.query("BEGIN");
        await client.query(sql);
        await client.query("INSERT INTO schema_migrations (version) VALUES ($1)", [version]);
        await client.query("COMMIT");
      } catch (err) {
        await client.query("ROLLBACK").catch(() => {});
        throw new Error(`migration ${file} failed: ${(err as Error).message}`, { cause: err });
      }
      applied.push(version);
    }
    await client.query("SELECT pg_advisory_unlock($1)", [MIGRATION_LOCK]);
    return applied;
  } finally {
    await client.end().catch(() => {});
  }
}

/** A statement's first keyword (`SELECT`, `INSERT`, `BEGIN`…): what its span is named after. */
function operationOf(text: string): string {
  return /^\s*(\w+)/.exec(text)?.[1]?.toUpperCase() ?? "QUERY";
}
