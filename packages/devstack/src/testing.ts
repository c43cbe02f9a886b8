import { randomBytes } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Writable } from "node:stream";
import { createLogger, type Logger } from "@gw/core";
import { type RunningSpiceDBLocal, startSpiceDBLocal } from "@gw/spicedb-local";
import { freePort } from "./free-port.ts";
import { REPO_ROOT, type RunningNodeProcess, startNodeProcess } from "./node-process.ts";
import { type RunningRedis, startRedisServer } from "./redis-server.ts";

export { freePort } from "./free-port.ts";
export type { RunningNodeProcess } from "./node-process.ts";
export { type RawResponse, rawHttp } from "./raw-http.ts";

export interface TestRedis extends RunningRedis {
  /** Stops the server, keeping its port and data, as an outage would. */
  halt(): Promise<void>;
  /** Starts it again on the same port after `halt`. */
  restart(): Promise<void>;
}

/** A real redis-server for one test file: free port, its own temporary data directory. */
export async function startTestRedis(): Promise<TestRedis> {
  const dir = await mkdtemp(join(tmpdir(), "gw-test-redis-"));
  for (let attempt = 1; ; attempt++) {
    try {
      let redis = await startRedisServer({ port: await freePort(), dir, appendOnly: false });
      return {
        ...redis,
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
 * A gateway as a separate OS process, for tests that need several replicas.
 * Its data directory (the development signing key) is `env.DATA_DIR` or a
 * fresh temporary one.
 */
export async function startGatewayProcess(env: NodeJS.ProcessEnv): Promise<RunningNodeProcess> {
  const dataDir = env.DATA_DIR ?? (await mkdtemp(join(tmpdir(), "gw-test-data-")));
  return startNodeProcess({
    name: "gateway",
    entry: "packages/gateway/src/main.ts",
    port: await freePort(),
    env: { PATH: process.env.PATH, HOST: "127.0.0.1", LOG_LEVEL: "warn", DATA_DIR: dataDir, ...env },
  });
}

/** The real SpiceDB engine, served on a free port with the repository's schema and a random preshared key. */
export async function startTestSpiceDB(): Promise<RunningSpiceDBLocal & { presharedKey: string }> {
  const presharedKey = randomBytes(16).toString("hex");
  const server = await startSpiceDBLocal({
    host: "127.0.0.1",
    port: 0,
    presharedKey,
    schemaFile: join(REPO_ROOT, "spicedb/schema.zed"),
  });
  return { ...server, presharedKey };
}

/** The environment that points a gateway or service at a test SpiceDB. */
export function spicedbEnv(spicedb: { endpoint: string; presharedKey: string }): Record<string, string> {
  return {
    SPICEDB_ENDPOINT: spicedb.endpoint,
    SPICEDB_PRESHARED_KEY: spicedb.presharedKey,
    SPICEDB_INSECURE: "true",
  };
}

/** A logger whose JSON lines land in `lines`, for tests that check what is (or is never) logged. */
export function capturingLogger(level = "info", lines: string[] = []): { logger: Logger; lines: string[] } {
  const sink = new Writable({
    write(chunk, _encoding, done) {
      lines.push(String(chunk));
      done();
    },
  });
  return { logger: createLogger("test", level, sink), lines };
}

/**
 * Asserts that a response is a catalogue error: `status`, a JSON body, and
 * nothing of a stack trace or another system's internals in it. Returns the body.
 */
export async function expectJsonError(res: Response, status: number): Promise<Record<string, unknown>> {
  const { expect } = await import("vitest");
  expect(res.status).toBe(status);
  expect(res.headers.get("content-type")).toBe("application/json; charset=utf-8");
  const body = (await res.json()) as Record<string, unknown>;
  expect(JSON.stringify(body)).not.toMatch(/RangeError|at .*\.(ts|js)|node_modules/);
  return body;
}
