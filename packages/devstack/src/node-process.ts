import { type ChildProcess, spawn } from "node:child_process";
import { resolve } from "node:path";
import { stopProcess } from "./redis-server.ts";

export const REPO_ROOT = resolve(import.meta.dirname, "../../..");

export interface RunningNodeProcess {
  name: string;
  url: string;
  process: ChildProcess;
  /** Everything the process printed so far (its JSON log lines). */
  output(): string;
  stop(): Promise<void>;
}

/**
 * Runs one of the project's entry points (e.g. `packages/gateway/src/main.ts`)
 * on this same Node, and resolves once `GET {url}/healthz` answers 200.
 */
export async function startNodeProcess(options: {
  name: string;
  entry: string;
  port: number;
  env: NodeJS.ProcessEnv;
  /** Ready when this says so about the output so far; default: `GET {url}/healthz` answers 200. */
  readyWhen?: (output: string) => boolean;
  /** Forward the child's output to ours as it comes (the dev stack does; tests keep it). */
  inheritOutput?: boolean;
  timeoutMs?: number;
}): Promise<RunningNodeProcess> {
  const child = spawn(process.execPath, [resolve(REPO_ROOT, options.entry)], {
    env: { ...options.env, PORT: String(options.port) },
    // The IPC channel lets the child notice if we die without stopping it (see `exitWithParent`).
    stdio: ["ignore", "pipe", "pipe", "ipc"],
  });
  let output = "";
  for (const stream of [child.stdout, child.stderr]) {
    stream?.on("data", (chunk: Buffer) => {
      output += chunk.toString();
      if (options.inheritOutput) process.stdout.write(chunk);
    });
  }
  const url = `http://127.0.0.1:${options.port}`;
  const deadline = Date.now() + (options.timeoutMs ?? 20_000);
  while (true) {
    if (child.exitCode !== null) {
      throw new Error(`${options.name} exited with code ${child.exitCode} before it was healthy:\n${output}`);
    }
    if (options.readyWhen) {
      if (options.readyWhen(output)) break;
    } else {
      try {
        const res = await fetch(`${url}/healthz`);
        if (res.ok) break;
      } catch {
        // not listening yet
      }
    }
    if (Date.now() > deadline) {
      child.kill("SIGKILL");
      throw new Error(`${options.name} was not healthy within the deadline:\n${output}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  return { name: options.name, url, process: child, output: () => output, stop: () => stopProcess(child) };
}
