import type { ChildProcess } from "node:child_process";
import { migrateVectorDatabase } from "@gw/core/postgres";
import { startVectorDatabaseProcess, vectorDatabaseTemplateFile } from "@gw/devstack";
import { beforeAll } from "vitest";

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
 * cluster kept in the project's node_modules/.cache (about a second; the first
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
