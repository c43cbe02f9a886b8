/**
 * A real redis-server for a test file, a test's own client of a Redis, and
 * what tests read from one: its keys on every master, the commands it runs.
 */
import { type ChildProcess, execFile, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Writable } from "node:stream";
import { promisify } from "node:util";
import { createRedis, type RedisClient } from "@gw/core/redis";
import { freePort, type RunningRedis, startRedisServer } from "@gw/devstack";

const execFileAsync = promisify(execFile);

/** The Redis deployments the suite runs against: one server, and a three-master Redis Cluster. */
export type RedisTopology = "single" | "cluster";

/** A test's Redis, whichever its topology. */
export interface TestRedisStore {
  topology: RedisTopology;
  /** What `REDIS_URL` says to reach it (`redis+cluster://…` for a cluster). */
  url: string;
  /** Every redis-server behind `url`: the one server, or each master of the cluster. */
  nodes: { url: string; port: number }[];
  /** Stops every server, keeping ports and data, as an outage would. */
  halt(): Promise<void>;
  /** Starts them again on the same ports after `halt`. */
  restart(): Promise<void>;
  stop(): Promise<void>;
}

export interface TestRedis extends RunningRedis, TestRedisStore {
  topology: "single";
}

/** A real redis-server for one test file: free port, its own temporary data directory. */
export async function startTestRedis(): Promise<TestRedis> {
  const dir = await mkdtemp(join(tmpdir(), "gw-test-redis-"));
  for (let attempt = 1; ; attempt++) {
    try {
      let redis = await startRedisServer({ port: await freePort(), dir, appendOnly: false });
      return {
        ...redis,
        topology: "single",
        nodes: [{ url: redis.url, port: redis.port }],
        halt: () => redis.stop(),
        async restart() {
          redis = await startRedisServer({ port: redis.port, dir, appendOnly: false });
        },
        async stop() {
          await redis.stop();
          await rm(dir, { recursive: true, force: true });
        },
      };
    } catch (err) {
      // Another process may have taken the port between our probe and redis-server's bind.
      if (attempt >= 3) throw err;
    }
  }
}

/**
 * A test's own Redis client. It sees the outages its test makes (a halted server): each failure
 * reaches the command that fails, and the connection's errors are not printed as unhandled.
 */
export function testRedisClient(url: string): RedisClient {
  const redis = createRedis(url, { connectionName: "test" });
  redis.on("error", () => {});
  return redis;
} /**
 * Every key matching `pattern` (a `SCAN MATCH` glob) on every master of
 * `redis`: `KEYS` or `SCAN` sent through a Cluster client asks one master only.
 */
export async function scanKeys(redis: RedisClient, pattern: string): Promise<string[]> {
  const found = new Set<string>();
  const nodes = "nodes" in redis ? redis.nodes("master") : [redis];
  for (const node of nodes) {
    let cursor = "0";
    do {
      const [next, keys] = await node.scan(cursor, "MATCH", pattern, "COUNT", 1000);
      for (const key of keys) found.add(key);
      cursor = next;
    } while (cursor !== "0");
  }
  return [...found].sort();
}

/**
 * How many writes one server's client made to its socket while `run` ran
 * (each is a syscall, and a wake-up of Redis): commands sent together
 * (`sentTogether`) count once.
 */
export async function socketWritesDuring(redis: RedisClient, run: () => Promise<unknown>): Promise<number> {
  await redis.ping();
  const socket = (redis as unknown as { stream: Writable & Record<"_write" | "_writev", unknown> }).stream;
  const originals = { _write: socket._write, _writev: socket._writev };
  let writes = 0;
  for (const name of ["_write", "_writev"] as const) {
    const original = originals[name] as (...args: unknown[]) => unknown;
    socket[name] = (...args: unknown[]) => {
      writes++;
      return original.apply(socket, args);
    };
  }
  try {
    await run();
  } finally {
    Object.assign(socket, originals);
  }
  return writes;
}

/**
 * Every command the servers of `redis` carry out from now until `stop`
 * (`redis-cli monitor` on each node), each as its lower-cased name and its
 * arguments. `stop` first waits until each monitor has shown a marker sent
 * after everything before it, so no command is missed.
 */
export async function monitorCommands(
  redis: Pick<TestRedisStore, "nodes">,
): Promise<{ commands: string[][]; stop(): Promise<void> }> {
  const commands: string[][] = [];
  const marker = `monitor-end-${randomBytes(6).toString("hex")}`;
  const monitors = await Promise.all(
    redis.nodes.map(
      (node) =>
        new Promise<{ port: number; child: ChildProcess; ended: Promise<void> }>((resolve, reject) => {
          const child = spawn("redis-cli", ["-p", String(node.port), "monitor"], {
            stdio: ["ignore", "pipe", "ignore"],
          });
          let pending = "";
          let started = false;
          let end!: () => void;
          const ended = new Promise<void>((r) => {
            end = r;
          });
          child.once("error", reject);
          child.stdout!.on("data", (chunk: Buffer) => {
            pending += chunk.toString();
            const lines = pending.split("\n");
            pending = lines.pop()!;
            for (const line of lines) {
              if (!started) {
                started = line.trim() === "OK";
                if (started) resolve({ port: node.port, child, ended });
                continue;
              }
              const args = [...line.matchAll(/"((?:[^"\\]|\\.)*)"/g)].map((m) => m[1]!);
              if (args[0]?.toLowerCase() === "echo" && args[1] === marker) end();
              else if (args.length > 0) commands.push([args[0]!.toLowerCase(), ...args.slice(1)]);
            }
          });
        }),
    ),
  );
  return {
    commands,
    async stop() {
      await Promise.all(
        monitors.map(async ({ port, child, ended }) => {
          await runRedisCli(["-p", String(port), "echo", marker]);
          await ended;
          child.kill();
        }),
      );
    },
  };
}

async function runRedisCli(args: string[]): Promise<string> {
  try {
    const { stdout } = await execFileAsync("redis-cli", args, { timeout: 30_000 });
    return stdout;
  } catch (err) {
    const { code, stdout, stderr } = err as { code?: string; stdout?: string; stderr?: string };
    if (code === "ENOENT")
      throw new Error("could not run redis-cli (install it: apt-get install -y redis-tools)");
    throw new Error(`redis-cli ${args.join(" ")} failed: ${stderr || stdout || String(err)}`);
  }
}
