/**
 * vitest `globalSetup`: one real PostgreSQL for the whole test run (initdb
 * into a temporary directory, a free port), with a template database that
 * has every migration applied. Each test file then gets its own database
 * copied from it (`useTestDatabase` in `testing.ts`), which takes tens of
 * milliseconds instead of a server per file.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { migrate } from "@gw/core";
import type { TestProject } from "vitest/node";
import { freePort } from "./free-port.ts";
import { ensureDatabase, type RunningPostgres, startPostgresServer } from "./postgres-server.ts";

/** The template every test database is copied from: migrated once per run. */
export const MIGRATED_TEMPLATE = "gw_test_template";

declare module "vitest" {
  export interface ProvidedContext {
    /** Port of the run's PostgreSQL (127.0.0.1, superuser `gateway`, trust authentication). */
    postgresPort: number;
  }
}

/**
 * Starts PostgreSQL on a free port. PostgreSQL cannot be asked to bind port
 * 0, so a port another process took between our probe and its bind is
 * retried with another one.
 */
export async function startTestPostgres(): Promise<RunningPostgres & { dir: string }> {
  const root = await mkdtemp(join(tmpdir(), "gw-test-postgres-"));
  for (let attempt = 1; ; attempt++) {
    try {
      const server = await startPostgresServer({
        port: await freePort(),
        dir: join(root, `data-${attempt}`),
        ephemeral: true,
      });
      return {
        ...server,
        dir: root,
        async stop() {
          await server.stop();
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
