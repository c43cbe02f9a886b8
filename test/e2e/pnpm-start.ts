import { type ChildProcess, execFile, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { rmSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { delimiter, join, resolve } from "node:path";
import { promisify } from "node:util";
import { createRedis, localRedisUrl, type RedisClient } from "@gw/core/redis";
import { freePort, REPO_ROOT, startPostgresServer } from "@gw/devstack";
import { ApiKeyStore, type CreateApiKeyInput } from "@gw/gateway";
import { workerTestVectorDatabase } from "@gw/test-kit";
import { watchApi } from "@gw/test-kit/api-conformance";
import type { FakeLLM } from "@gw/test-kit/llm-upstream";
import { afterAll, beforeAll } from "vitest";

const run = promisify(execFile);

/**
 * PATH as a user's shell has it: without the `node_modules/.bin` folders that
 * `pnpm exec`/`pnpm test` put first. There, `node` is pnpm's shell-script shim,
 * so `pnpm` itself (`#!/usr/bin/env node`) would run under a shell that takes
 * the signals meant for it.
 */
export const userPath = (process.env.PATH ?? "")
  .split(delimiter)
  .filter((dir) => !/[\\/]node_modules[\\/]\.bin$/.test(dir))
  .join(delimiter);

let template: Promise<string> | undefined;

/**
 * Puts in `dataDir` the PostgreSQL cluster that `pnpm start` creates on its first start there (initdb,
 * the `gateway` database), copied from one made once per test file: initdb with fsync on takes seconds
 * on a loaded machine, a copy a fraction of one. For tests whose subject is not the first start.
 */
export async function seedPostgres(dataDir: string): Promise<void> {
  template ??= (async () => {
    const dir = await mkdtemp(join(tmpdir(), "gw-postgres-template-"));
    process.once("exit", () => rmSync(dir, { recursive: true, force: true }));
    const cluster = join(dir, "postgres");
    const server = await startPostgresServer({ port: await freePort(), dir: cluster, ephemeral: true });
    await server.stop();
    return cluster;
  })();
  // cp -a keeps the owner (the `postgres` user when run as root), which PostgreSQL insists on.
  await run("cp", ["-a", await template, join(dataDir, "postgres")]);
}

/** A data directory of a stack's own (`DATA_DIR`), under the system's temporary directory, named `prefix…`. */
export function newDataDir(prefix: string): Promise<string> {
  return mkdtemp(join(tmpdir(), prefix));
}

/**
 * Removes a stack's data directory once the stack has stopped: retried a while, as a process just
 * stopped may still be closing files in it.
 */
export function removeDataDir(dir: string): Promise<void> {
  return rm(dir, { recursive: true, force: true, maxRetries: 10, retryDelay: 200 });
}

/** The environment of a `pnpm start` on free ports, with its data in `dataDir`. */
export async function stackEnv(dataDir: string, extra: NodeJS.ProcessEnv = {}): Promise<NodeJS.ProcessEnv> {
  return {
    PATH: userPath,
    PORT: String(await freePort()),
    SERVICE_PORT: String(await freePort()),
    LOCAL_REDIS_PORT: String(await freePort()),
    LOCAL_POSTGRES_PORT: String(await freePort()),
    SPICEDB_LOCAL_PORT: String(await freePort()),
    LOCAL_VECTOR_DATABASE_PORT: String(await freePort()),
    // Used when no model provider is configured (no LLM_BASE_URL in `extra`).
    DEVELOPMENT_PROVIDER_PORT: String(await freePort()),
    DATA_DIR: dataDir,
    // The run's compile cache (vitest.config.ts), for pnpm itself and the CLIs as for the stack.
    ...(process.env.NODE_COMPILE_CACHE ? { NODE_COMPILE_CACHE: process.env.NODE_COMPILE_CACHE } : {}),
    ...extra,
  };
}

/**
 * `VECTOR_DATABASE_URL` of the test worker's vector database (`workerTestVectorDatabase`), for a stack
 * whose test is not about vectors: `pnpm start` then starts no vector database of its own, one PGlite
 * start less (a second or two of CPU, three with a data directory). `stack.test.ts`, `start-stop.test.ts`
 * and `prometheus.test.ts` keep the stack's own.
 */
export async function workerVectors(): Promise<NodeJS.ProcessEnv> {
  return { VECTOR_DATABASE_URL: (await workerTestVectorDatabase()).url };
}

export interface RunningStack {
  process: ChildProcess;
  gatewayUrl: string;
  /** Everything it printed so far (a test keeps it all; `pnpm start` itself does not). */
  output(): string;
  /** Resolves when it has exited. */
  exited: Promise<void>;
  /** What Ctrl-C does in a terminal: SIGINT to the whole foreground process group; then waits for it to exit. */
  interrupt(): Promise<void>;
}

/** `pnpm start` as a user runs it; resolves once the gateway answers `/readyz` (whatever the log level). */
export async function startStack(env: NodeJS.ProcessEnv): Promise<RunningStack> {
  const child = spawn("pnpm", ["start"], {
    cwd: REPO_ROOT,
    env,
    stdio: ["ignore", "pipe", "pipe"],
    detached: true,
  });
  let output = "";
  child.stdout?.on("data", (c: Buffer) => (output += c));
  child.stderr?.on("data", (c: Buffer) => (output += c));
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  // pnpm may exit before the stack has stopped (its script goes on stopping it, in order): the stack is
  // gone once every process of it that writes to this output has closed it.
  const outputClosed = new Promise<void>((resolve) => child.stdout?.once("close", () => resolve()));
  const gatewayUrl = `http://127.0.0.1:${env.PORT}`;
  const stack: RunningStack = {
    process: child,
    gatewayUrl,
    output: () => output,
    exited,
    async interrupt() {
      if (!child.pid || child.exitCode !== null || child.signalCode !== null) return;
      process.kill(-child.pid, "SIGINT");
      // The stack gives the service 15 s to end its background runs before it kills it (WORKERS_GRACE_MS).
      await Promise.race([Promise.all([exited, outputClosed]), new Promise((r) => setTimeout(r, 30_000))]);
      try {
        process.kill(-child.pid, "SIGKILL");
      } catch {
        // the whole group is gone already
      }
    },
  };
  const deadline = Date.now() + 90_000;
  while (
    !(await fetch(`${gatewayUrl}/readyz`).then(
      (r) => r.ok,
      () => false,
    ))
  ) {
    if (child.exitCode !== null || Date.now() > deadline) {
      await stack.interrupt();
      throw new Error(`stack did not come up:\n${output}`);
    }
    await new Promise((r) => setTimeout(r, 25));
  }
  // Every answer a test gets from it must be what the OpenAPI document declares.
  void exited.then(watchApi(gatewayUrl));
  return stack;
}

/**
 * A key written to the stack's Redis as `pnpm keys create` writes it (the same store), for a test
 * that only needs one: no process started. `stack.test.ts` runs `pnpm keys create` itself, and `keys`
 * runs the CLI where its flags are what a test is about.
 */
export async function createKey(
  env: NodeJS.ProcessEnv,
  input: Pick<CreateApiKeyInput, "org" | "owner"> & Partial<CreateApiKeyInput>,
): Promise<{ key: string; id: string }> {
  const redis = createRedis(localRedisUrl(env), { connectionName: "e2e-keys" });
  try {
    const { record, secret } = await new ApiKeyStore(redis).create(input);
    return { key: secret, id: record.id };
  } finally {
    redis.disconnect();
  }
}

/**
 * `pnpm keys …` without pnpm: the same script on the same Node (pnpm's own start
 * is half a second of CPU), for keys a test only needs to have. `stack.test.ts`
 * runs `pnpm keys create` itself once.
 */
export function keys(env: NodeJS.ProcessEnv, args: string[]): Promise<{ stdout: string; stderr: string }> {
  return run(process.execPath, [resolve(REPO_ROOT, "packages/gateway/src/cli/keys.ts"), ...args], {
    cwd: REPO_ROOT,
    env,
  });
}

/**
 * What the client libraries' cases (`openai-sdk.ts` and the others) run against: a `pnpm start` at
 * `gatewayUrl`, its provider, and keys in fresh organizations written to its Redis. Call it inside the
 * `describe` that runs the cases; `env` and the rest are read once the stack is up.
 */
export function stackTarget(stack: () => { env: NodeJS.ProcessEnv; gatewayUrl: string; llm: FakeLLM }) {
  let redis: RedisClient | undefined;
  beforeAll(() => {
    redis = createRedis(localRedisUrl(stack().env), { connectionName: "e2e-sdk" });
  });
  afterAll(() => redis?.disconnect());
  return () => ({
    gatewayUrl: stack().gatewayUrl,
    llm: stack().llm,
    async createKey(input?: Partial<CreateApiKeyInput>) {
      const org = `sdk-${randomBytes(5).toString("hex")}`;
      const { secret } = await new ApiKeyStore(redis!).create({ org, owner: "backend", ...input });
      return { secret };
    },
  });
}
