import type { ChildProcess } from "node:child_process";
import { mkdir } from "node:fs/promises";
import { createConnection } from "node:net";
import { spawnStackChild } from "./stack-child.ts";

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
    // SIGTERM still writes the data first, but exits even when that fails (its directory removed, a full
    // disk): a Redis that refuses to exit would outlive the stack whose death sent it that signal.
    "--shutdown-on-sigterm",
    "force",
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
    child = spawnStackChild("redis-server", args, { stdio: ["ignore", "ignore", "pipe"] });
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
    child.once("exit", async (code) => {
      if (code === 127)
        return reject(
          new Error(
            `could not run redis-server (install it: apt-get install -y redis-server): ${stderr.trim()}`,
          ),
        );
      // Most often it could not bind: say who holds the port, if a Redis does.
      const holder = await serverPid(options.port);
      reject(
        holder === undefined
          ? new Error(`redis-server exited with code ${code}: ${stderr.trim()}`)
          : portHeld(options.port, holder),
      );
    });
  });
  exited.catch(() => {});
  await Promise.race([waitForServer(options.port, child.pid!, 10_000), exited]);
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

/**
 * Waits until the redis-server with process id `pid` answers on `port`: a PING
 * alone would also be answered by another Redis already on that port (this
 * one then fails to bind and exits).
 */
async function waitForServer(port: number, pid: number, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const answering = await serverPid(port);
    if (answering === pid) return;
    if (answering !== undefined) throw portHeld(port, answering);
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`redis-server on port ${port} did not answer within ${timeoutMs} ms`);
}

const portHeld = (port: number, pid: number) =>
  new Error(`port ${port} is in use by another redis-server (process ${pid})`);

/** The process id of the Redis answering PING on `port` (from `INFO server`), if one does. */
function serverPid(port: number): Promise<number | undefined> {
  return new Promise((resolve) => {
    const socket = createConnection({ port, host: "127.0.0.1" });
    let reply = "";
    const done = (pid: number | undefined) => {
      socket.destroy();
      resolve(pid);
    };
    socket.setTimeout(500);
    socket.once("connect", () => socket.write("PING\r\nINFO server\r\n"));
    socket.on("data", (data) => {
      reply += data.toString();
      if (reply.startsWith("-")) return done(undefined); // LOADING and the like: not ready yet
      const pid = /\r\nprocess_id:(\d+)\r\n/.exec(reply)?.[1];
      if (pid) done(Number(pid));
    });
    socket.once("error", () => done(undefined));
    socket.once("timeout", () => done(undefined));
  });
}
