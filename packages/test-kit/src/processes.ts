/** A gateway as an OS process of its own, and whether processes a test started still run. */
import { readFileSync } from "node:fs";
import { mkdtemp } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type RunningNodeProcess, startNodeProcess } from "@gw/devstack";
import { startNothingListener } from "./ports.ts";
import { createTestDatabase } from "./postgres.ts";
import { spicedbEnv } from "./test-spicedb.ts";

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
  const noSpiceDB = spicedbEnv({ endpoint: nothing.address, presharedKey: "no-spicedb-here" });
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
