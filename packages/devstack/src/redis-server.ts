import { type ChildProcess, spawn } from "node:child_process";
import { mkdir } from "node:fs/promises";
import { createConnection } from "node:net";

export interface RedisServerOptions {
  port: number;
  /** Data directory (AOF and RDB files). */
  dir: string;
  /** Append-only file on: every write survives a crash. */
  appendOnly: boolean;
  /** Where redis-server's own log goes. */
  logFile?: string;
  /** A Redis Cluster node, with its cluster bus on this port (its state in `nodes.conf` under `dir`). */
  clusterBusPort?: number;
}

export interface RunningRedis {
  url: string;
  port: number;
  process: ChildProcess;
  stop(): Promise<void>;
}

/**
 * Runs the OS package's `redis-server` on 127.0.0.1 and resolves once it
 * answers PING. Used by `pnpm start` (fixed port, data under `.data/redis`)
 * and by the test harness (free port, temporary data).
 */
export async function startRedisServer(options: RedisServerOptions): Promise<RunningRedis> {
  await mkdir(options.dir, { recursive: true });
  const args = [
    "--port",
    String(options.port),
    "--bind",
    "127.0.0.1",
    "--dir",
    options.dir,
    "--appendonly",
    options.appendOnly ? "yes" : "no",
    "--save",
    options.appendOnly ? "3600 1" : "",
    "--protected-mode",
    "yes",
    "--logfile",
    options.logFile ?? "",
    "--daemonize",
    "no",
    ...(options.clusterBusPort
      ? [
          "--cluster-enabled",
          "yes",
          "--cluster-config-file",
          "nodes.conf",
          "--cluster-port",
          String(options.clusterBusPort),
          "--cluster-node-timeout",
          "2000",
        ]
      : []),
  ];
  let child: ChildProcess;
  try {
    child = spawn("redis-server", args, { stdio: ["ignore", "ignore", "pipe"] });
  } catch (err) {
    throw new Error(
      `could not run redis-server (install it: apt-get install -y redis-server): ${String(err)}`,
    );
  }
  let stderr = "";
  child.stderr?.on("data", (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  const exited = new Promise<never>((_, reject) => {
    child.once("error", (err) =>
      reject(
        new Error(`could not run redis-server (install it: apt-get install -y redis-server): ${err.message}`),
      ),
    );
    child.once("exit", (code) =>
      reject(new Error(`redis-server exited with code ${code}: ${stderr.trim()}`)),
    );
  });
  exited.catch(() => {});
  await Promise.race([waitForPing(options.port, 10_000), exited]);
  return {
    url: `redis://127.0.0.1:${options.port}`,
    port: options.port,
    process: child,
    stop: () => stopProcess(child),
  };
}

/** SIGTERM (redis-server then flushes its AOF), or `signal`; SIGKILL if it lingers. */
export function stopProcess(
  child: ChildProcess,
  graceMs = 5_000,
  signal: NodeJS.Signals = "SIGTERM",
): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    const timer = setTimeout(() => child.kill("SIGKILL"), graceMs);
    child.once("exit", () => {
      clearTimeout(timer);
      resolve();
    });
    child.kill(signal);
  });
}

async function waitForPing(port: number, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await ping(port)) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`redis-server on port ${port} did not answer PING within ${timeoutMs} ms`);
}

function ping(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = createConnection({ port, host: "127.0.0.1" });
    socket.setTimeout(500);
    socket.once("connect", () => socket.write("PING\r\n"));
    socket.once("data", (data) => {
      socket.destroy();
      resolve(data.toString().startsWith("+PONG"));
    });
    socket.once("error", () => resolve(false));
    socket.once("timeout", () => {
      socket.destroy();
      resolve(false);
    });
  });
}
