/**
 * vitest `globalSetup`: one real PostgreSQL for the whole test run (initdb
 * into a temporary directory, a free port), with a template database that
 * has every migration applied. Each test file then gets its own database
 * copied from it (`useTestDatabase` in `postgres.ts`), which takes tens of
 * milliseconds instead of a server per file.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { migrate } from "@gw/core/postgres";
import { ensureDatabase, freePort, type RunningPostgres, startPostgresServer } from "@gw/devstack";
import type { TestProject } from "vitest/node";

/** The template every test database is copied from: migrated once per run. */
export const MIGRATED_TEMPLATE = "gw_test_template";

declare module "vitest" {
  export interface ProvidedContext {
    /** Port of the run's PostgreSQL (127.0.0.1, superuser `gateway`, trust authentication). */
    postgresPort: number;
  }
}

/** A PostgreSQL of a test's own, that it may stop and start again (an outage) without losing its data. */
export interface TestPostgres extends RunningPostgres {
  /** Stops the server (fast shutdown), keeping its port and data, as an outage would; nothing if halted. */
  halt(): Promise<void>;
  /** Starts it again on the same port and data after `halt`; nothing if it runs. */
  restart(): Promise<void>;
  /** Stops it and removes its data. */
  stop(): Promise<void>;
}

/**
 * Starts PostgreSQL on a free port, its data in a temporary directory.
 * PostgreSQL cannot be asked to bind port 0, so a port another process took
 * between our probe and its bind is retried with another one.
 */
export async function startTestPostgres(): Promise<TestPostgres> {
  const root = await mkdtemp(join(tmpdir(), "gw-test-postgres-"));
  for (let attempt = 1; ; attempt++) {
    const dir = join(root, `data-${attempt}`);
    try {
      const first = await startPostgresServer({ port: await freePort(), dir, ephemeral: true });
      const port = first.port;
      let server: RunningPostgres | undefined = first;
      return {
        ...first,
        async halt() {
          await server?.stop();
          server = undefined;
        },
        async restart() {
          server ??= await startPostgresServer({ port, dir, ephemeral: true });
        },
        async stop() {
          await server?.stop();
          server = undefined;
          await rm(root, { recursive: true, force: true });
        },
      };
    } catch (err) {
      if (attempt >= 3 || !/could not bind|Address already in use/i.test(String(err))) {
        await rm(root, { recursive: true, force: true });
        throw err;
      }
    }
  }
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const server = await startTestPostgres();
  await ensureDatabase(server.urlOf("postgres"), MIGRATED_TEMPLATE);
  await migrate(server.urlOf(MIGRATED_TEMPLATE));
  project.provide("postgresPort", server.port);
  return () => server.stop();
}
