/**
 * A gateway as an OS process of its own, an entry point run to its exit, and whether processes a test
 * started still run.
 */
import { spawn } from "node:child_process";
import { mkdtemp, readdir, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { SHUTDOWN_DEADLINE_MS } from "@gw/core/process";
import {
  commandLine,
  compileCacheEnv,
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

/** How long `runToExit` waits for an entry to exit before it asks what it is doing. */
const RUN_TO_EXIT_DEADLINE_MS = 45_000;
/** The timeout of a test that runs an entry to its exit: its deadline, the report's wait, and room to spare. */
export const RUN_TO_EXIT_TEST_TIMEOUT_MS = RUN_TO_EXIT_DEADLINE_MS + 15_000;

/** How an entry point run by `runToExit` ended. */
export interface Exited {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

/**
 * Runs `entry` (a path from the working directory, or absolute; or `[entry, ...args]`) with this Node to
 * its exit, with `env` and nothing else of this process's environment but the compile cache a stack's
 * child gets (`compileCacheEnv`: the entry's modules are read compiled, which halves its CPU), and no
 * stdin: how it ended and what it wrote.
 *
 * One that has not exited after `deadlineMs` is asked for Node's diagnostic report (SIGUSR2, with
 * `--report-on-signal`), then killed, and the promise rejects naming what it was waiting on: its
 * JavaScript stack and the handles and requests its event loop held, so that a hang explains itself
 * where a test's timeout would say only that it ran out. The default is well above the few seconds an
 * entry takes to load on a loaded machine (17 s seen, beside a CI run and three more such entries),
 * and a test that uses it gives itself more: `RUN_TO_EXIT_TEST_TIMEOUT_MS`.
 */
export async function runToExit(
  command: string | readonly [entry: string, ...args: string[]],
  env: NodeJS.ProcessEnv,
  deadlineMs = RUN_TO_EXIT_DEADLINE_MS,
): Promise<Exited> {
  const [entry, ...args] = typeof command === "string" ? [command] : command;
  const reports = await mkdtemp(join(tmpdir(), "gw-report-"));
  try {
    const child = spawn(
      process.execPath,
      ["--report-on-signal", "--report-signal=SIGUSR2", `--report-directory=${reports}`, entry, ...args],
      { env: { ...compileCacheEnv(), ...env }, stdio: ["ignore", "pipe", "pipe"] },
    );
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (chunk) => {
      stdout += chunk;
    });
    child.stderr.on("data", (chunk) => {
      stderr += chunk;
    });
    const closed = new Promise<Exited>((resolve, reject) => {
      child.on("error", reject);
      child.on("close", (code, signal) => resolve({ code, signal, stdout, stderr }));
    });
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<"late">((resolve) => {
      timer = setTimeout(() => resolve("late"), deadlineMs);
    });
    const first = await Promise.race([closed, late]);
    clearTimeout(timer);
    if (first !== "late") return first;
    const written = stderr; // Before the report's own lines.
    child.kill("SIGUSR2");
    const report = await reportIn(reports, 5_000);
    child.kill("SIGKILL");
    await closed.catch(() => undefined);
    throw new Error(
      `${entry} had not exited after ${deadlineMs} ms.\nIts stderr: ${JSON.stringify(written)}\n${report}`,
    );
  } finally {
    await rm(reports, { recursive: true, force: true });
  }
}

/** What the diagnostic report written into `dir` within `timeoutMs` says a process was doing. */
async function reportIn(dir: string, timeoutMs: number): Promise<string> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const [name] = (await readdir(dir)).filter((file) => file.endsWith(".json"));
    if (name) {
      try {
        const report = JSON.parse(await readFile(join(dir, name), "utf8")) as {
          javascriptStack?: { message?: string; stack?: string[] };
          libuv?: { type: string; is_active?: boolean; is_referenced?: boolean; [key: string]: unknown }[];
        };
        const waiting = (report.libuv ?? []).filter((handle) => handle.is_active && handle.is_referenced);
        return [
          `Its JavaScript stack: ${report.javascriptStack?.message ?? ""}`,
          ...(report.javascriptStack?.stack ?? []).map((frame) => `  ${frame}`),
          "What its event loop waited on:",
          ...waiting.map((handle) => `  ${JSON.stringify(handle)}`),
        ].join("\n");
      } catch {
        // Still being written.
      }
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  return `It wrote no diagnostic report within ${timeoutMs} ms (its JavaScript never yielded).`;
}
