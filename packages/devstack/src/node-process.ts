import type { ChildProcess } from "node:child_process";
import { closeSync, openSync, readFileSync } from "node:fs";
import { relative, resolve } from "node:path";
import { stopProcess } from "./redis-server.ts";
import { spawnStackChild } from "./stack-child.ts";

export const REPO_ROOT = resolve(import.meta.dirname, "../../..");

/**
 * Where the project's Node processes keep Node's compile cache (`NODE_COMPILE_CACHE`): the code of
 * every module they load, type-stripped and compiled, so the next start of a process reads it
 * instead of doing it again (a third of a service's start). Node keys each entry by the file's
 * content and its own version, so a stale entry is never used. `NODE_COMPILE_CACHE` set in the
 * environment wins; `NODE_DISABLE_COMPILE_CACHE=1` turns it off.
 */
export const COMPILE_CACHE_DIR = resolve(REPO_ROOT, "node_modules/.cache/node-compile");
/** `COMPILE_CACHE_DIR` as the settings reference writes it: from the repository's root. */
export const COMPILE_CACHE_SETTING = relative(REPO_ROOT, COMPILE_CACHE_DIR);

/** The compile cache settings a child of the stack, or a process a test runs, gets (`COMPILE_CACHE_DIR`). */
export function compileCacheEnv(env: NodeJS.ProcessEnv = process.env): NodeJS.ProcessEnv {
  return {
    NODE_COMPILE_CACHE: env.NODE_COMPILE_CACHE ?? COMPILE_CACHE_DIR,
    ...(env.NODE_DISABLE_COMPILE_CACHE ? { NODE_DISABLE_COMPILE_CACHE: env.NODE_DISABLE_COMPILE_CACHE } : {}),
  };
}

/** How much of a child's latest output is kept, for the error when it fails to start. */
export const OUTPUT_TAIL_CHARS = 8 * 1024;

export interface RunningNodeProcess {
  name: string;
  /** The port it listens on: the one it was given, or the one it reported (given 0). */
  port: number;
  url: string;
  process: ChildProcess;
  /** The last `OUTPUT_TAIL_CHARS` characters the process printed; nothing older is kept. */
  outputTail(): string;
  stop(): Promise<void>;
}

/**
 * Runs one of the project's entry points (e.g. `packages/gateway/src/main.ts`)
 * on this same Node, and resolves once it is ready: by default when
 * `GET {url}/healthz` answers 200. Given port 0, the child binds a port the
 * kernel picks and reports it over IPC (`reportListening` in core); readiness
 * is then checked on that port, which no other process can hold.
 */
export async function startNodeProcess(options: {
  name: string;
  entry: string;
  /** 0: whichever port is free, as the child reports it. */
  port: number;
  env: NodeJS.ProcessEnv;
  /** Asked every 50 ms until it says true; default: `GET {url}/healthz` answers 200. */
  isReady?: (port: number) => Promise<boolean>;
  /** Forward the child's output to ours as it comes (the dev stack does), without keeping it. */
  inheritOutput?: boolean;
  /** Write the child's output straight to this file instead (no pipe through this process). */
  outputFile?: string;
  timeoutMs?: number;
}): Promise<RunningNodeProcess> {
  const fd = options.outputFile ? openSync(options.outputFile, "a") : undefined;
  const child = spawnStackChild(process.execPath, [resolve(REPO_ROOT, options.entry)], {
    env: { ...compileCacheEnv(), ...options.env, PORT: String(options.port) },
    // The IPC channel lets the child notice if we die without stopping it (see `onShutdown`).
    stdio: ["ignore", fd ?? "pipe", fd ?? "pipe", "ipc"],
  });
  if (fd !== undefined) closeSync(fd);
  let piped = "";
  const tail = () =>
    options.outputFile ? readFileSync(options.outputFile, "utf8").slice(-OUTPUT_TAIL_CHARS) : piped;
  for (const stream of [child.stdout, child.stderr]) {
    if (!stream) continue;
    stream.setEncoding("utf8");
    // Piped, so a child that prints faster than our output drains waits instead of piling up here.
    if (options.inheritOutput) stream.pipe(process.stdout, { end: false });
    stream.on("data", (chunk: string) => {
      piped = (piped + chunk).slice(-OUTPUT_TAIL_CHARS);
    });
  }
  let port = options.port;
  child.on("message", (message: { listening?: unknown }) => {
    if (options.port === 0 && typeof message?.listening === "number") port = message.listening;
  });
  const url = () => `http://127.0.0.1:${port}`;
  const isReady =
    options.isReady ??
    (() =>
      fetch(`${url()}/healthz`).then(
        (res) => res.ok,
        () => false,
      ));
  const deadline = Date.now() + (options.timeoutMs ?? 20_000);
  while (port === 0 || !(await isReady(port))) {
    if (child.exitCode !== null) {
      throw Object.assign(
        new Error(
          `${options.name} exited with code ${child.exitCode} before it was ready; its last output:\n${tail()}`,
        ),
        { exitCode: child.exitCode },
      );
    }
    if (Date.now() > deadline) {
      child.kill("SIGKILL");
      throw new Error(`${options.name} was not ready within the deadline; its last output:\n${tail()}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  return {
    name: options.name,
    port,
    url: url(),
    process: child,
    outputTail: tail,
    stop: () => stopProcess(child),
  };
}
