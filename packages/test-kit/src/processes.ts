/** A gateway as an OS process of its own, and whether processes a test started still run. */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { SHUTDOWN_DEADLINE_MS } from "@gw/core/process";
import {
  commandLine,
  processState,
  type RunningNodeProcess,
  startedAt,
  startNodeProcess,
} from "@gw/devstack";
import { startNothingListener } from "./ports.ts";
import { createTestDatabase } from "./postgres.ts";
import { spicedbEnv } from "./test-spicedb.ts";

/**
 * A gateway as a separate OS process, for tests that need several replicas.
 * Its data directory (the development signing key) is `env.DATA_DIR` or a
 * fresh temporary one, removed when it stops; its PostgreSQL database `env.DATABASE_URL` or a fresh
 * one (dropped with the run's server).
 */
export async function startGatewayProcess(env: NodeJS.ProcessEnv): Promise<RunningNodeProcess> {
  const madeDataDir = env.DATA_DIR === undefined;
  const dataDir = env.DATA_DIR ?? (await mkdtemp(join(tmpdir(), "gw-test-data-")));
  const removeMadeDataDir = async () => {
    if (madeDataDir) await rm(dataDir, { recursive: true, force: true });
  };
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
        await Promise.all([nothing.close(), removeMadeDataDir()]);
      },
    };
  } catch (err) {
    await Promise.all([nothing.close(), removeMadeDataDir()]);
    throw err;
  }
}

/**
 * The processes of `pids` still running once every one of them has exited, or `timeoutMs` has
 * run out: each as its pid and command line. A pid counts as the process it named when this was
 * called (same start time): the kernel hands a dead process's pid to a new one once its pids wrap,
 * which on a machine with `pid_max` 32768 and a suite starting thousands of processes can happen
 * within the wait.
 *
 * The default wait is the longest a stack's process may take to stop on its own (SIGTERM, or the
 * parent-death signal when its runner was killed), and 5 s more: the gateway's, its requests' grace
 * (`SHUTDOWN_GRACE_MS`, 10 s by default) and then its shutdown's deadline. Under that, a process
 * still within its own deadlines on a loaded machine would count as one left running.
 */
export async function survivors(
  pids: readonly number[],
  timeoutMs = STACK_PROCESS_STOP_MS + 5_000,
  /**
   * The process table it reads (`/proc`; a test gives its own, so that its made-up pids never name a
   * real process): when the process with a pid started, and its command line; undefined when none runs.
   */
  table: ProcessTable = { startTime: startedAt, commandLine, state: processState },
): Promise<string[]> {
  const { startTime } = table;
  const started = new Map(pids.map((pid) => [pid, startTime(pid)]));
  const running = (pid: number) => {
    const when = started.get(pid);
    return when !== undefined && startTime(pid) === when;
  };
  const deadline = Date.now() + timeoutMs;
  while (pids.some(running) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
  return pids.filter(running).map((pid) => {
    const state = table.state?.(pid);
    return `${pid} ${table.commandLine(pid) ?? "(gone)"}${state ? ` (${state})` : ""}`;
  });
}

/** The gateway's shutdown deadline with `SHUTDOWN_GRACE_MS` at its default: the longest of a stack's processes. */
const STACK_PROCESS_STOP_MS = 10_000 + SHUTDOWN_DEADLINE_MS;

/** What `survivors` reads of a process by its pid. */
export interface ProcessTable {
  startTime(pid: number): string | undefined;
  commandLine(pid: number): string | undefined;
  /** What it is doing (its state and threads'), for the message; none: not said. */
  state?(pid: number): string | undefined;
}
