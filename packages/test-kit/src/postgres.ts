import { randomBytes } from "node:crypto";
import { localServerUrl } from "@gw/devstack";
import pg from "pg";
import { afterAll, beforeAll, inject } from "vitest";
import { MIGRATED_TEMPLATE } from "./postgres-global-setup.ts";

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
