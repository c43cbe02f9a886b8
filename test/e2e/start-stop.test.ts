import { execFile } from "node:child_process";
import { writeFile } from "node:fs/promises";
import { createServer } from "node:net";
import { join } from "node:path";
import { promisify } from "node:util";
import { REPO_ROOT } from "@gw/devstack";
import { acceptsConnections, survivors } from "@gw/test-kit";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import {
  createKey,
  newDataDir,
  type RunningStack,
  removeDataDir,
  seedPostgres,
  stackEnv,
  startStack,
  workerVectors,
} from "./pnpm-start.ts";

const run = promisify(execFile);

/** The processes of a running stack, from its "stack is ready" line (printed whatever LOG_LEVEL says). */
async function stackProcesses(stack: RunningStack): Promise<{ runner: number; children: number[] }> {
  const deadline = Date.now() + 10_000;
  const readyLine = () => /^.*stack is ready.*$/m.exec(stack.output())?.[0];
  while (!readyLine()) {
    if (Date.now() > deadline) throw new Error(`no "stack is ready" line:\n${stack.output()}`);
    await new Promise((r) => setTimeout(r, 50));
  }
  const line = readyLine()!;
  const ready = JSON.parse(line) as { pid: number; processes: Record<string, number> };
  return { runner: ready.pid, children: Object.values(ready.processes) };
}

/**
 * Asserts that none of `pids` is still running once each has had its time to stop; names any that is.
 * One still running past its own deadlines (the gateway's, 40 s) is named in the output with what it
 * was doing then, and given 30 s more to finish exiting: on a loaded machine a process's exit (Node's
 * compile cache written, its threads ended) can itself take seconds. (A gateway that outlived its
 * deadline here twice was stuck in its exit for good: its log's flush retried a write to the killed
 * runner's pipe forever, fixed in core's logger; `packages/core/test/logger.test.ts`.)
 */
async function expectAllStopped(pids: readonly number[]): Promise<void> {
  const late = await survivors(pids);
  if (late.length > 0) console.warn(`running past the stack's deadlines: ${late.join("; ")}`);
  expect((await survivors(pids, 30_000)).join("; "), "still running").toBe("");
}

/** The one JSON line a start that failed before anything started writes ("stack failed to start"). */
function onlyLogLine(failed: { stdout: string } | undefined): Record<string, unknown> {
  const lines = failed!.stdout.split("\n").filter((l) => l.startsWith("{"));
  expect(lines).toHaveLength(1);
  return JSON.parse(lines[0]!);
}

/** A `pnpm start` that is expected to fail: its exit code and output (undefined if it exited 0). */
function failedStart(env: NodeJS.ProcessEnv, timeout?: number) {
  return run("pnpm", ["start"], { cwd: REPO_ROOT, env, ...(timeout ? { timeout } : {}) }).then(
    () => undefined,
    (err: { code: number; stdout: string; stderr: string }) => err,
  );
}

describe("pnpm start stops as one, whichever of its processes is told to", () => {
  const dirs: string[] = [];
  let stack: RunningStack | undefined;
  const freshEnv = async (extra: NodeJS.ProcessEnv = {}) => {
    const dir = await newDataDir("gw-start-stop-");
    dirs.push(dir);
    await seedPostgres(dir);
    return stackEnv(dir, extra);
  };
  afterEach(async () => {
    await stack?.interrupt();
    stack = undefined;
  });
  afterAll(async () => {
    for (const dir of dirs) await removeDataDir(dir);
  });

  it("kill -TERM of the pnpm process stops every process of the stack; meanwhile a second start names the ports in use and starts nothing", async () => {
    const env = await freshEnv();
    stack = await startStack(env);
    const { runner, children } = await stackProcesses(stack);
    // redis-server, postgres, spicedb-local, the local vector database, the development model provider
    // (no LLM_BASE_URL), service, gateway
    expect(children).toHaveLength(7);

    // The gateway listens on the loopback address only: 127.0.0.2 is loopback too, but not 127.0.0.1.
    expect(await acceptsConnections(Number(env.PORT), "127.0.0.1")).toBe(true);
    expect(await acceptsConnections(Number(env.PORT), "127.0.0.2")).toBe(false);

    const second = await run("pnpm", ["start"], { cwd: REPO_ROOT, env }).then(
      () => ({ code: 0, output: "" }),
      (err: { code: number; stdout: string; stderr: string }) => ({
        code: err.code,
        output: err.stdout + err.stderr,
      }),
    );
    expect(second.code).toBe(1);
    expect(second.output).toContain(
      `port ${env.LOCAL_REDIS_PORT} (the local redis-server) is in use: set LOCAL_REDIS_PORT`,
    );
    expect(second.output).toContain(
      `port ${env.LOCAL_POSTGRES_PORT} (the local PostgreSQL) is in use: set LOCAL_POSTGRES_PORT`,
    );
    expect(second.output).toContain(
      `port ${env.DEVELOPMENT_PROVIDER_PORT} (the development model provider) is in use: set DEVELOPMENT_PROVIDER_PORT`,
    );
    expect(second.output).toContain(
      `port ${env.LOCAL_VECTOR_DATABASE_PORT} (the local vector database) is in use: set LOCAL_VECTOR_DATABASE_PORT`,
    );
    expect(second.output).toContain(`port ${env.PORT} (the gateway) is in use: set PORT`);
    expect(second.output).not.toMatch(
      /redis-server started|PostgreSQL started|SpiceDB started|provider started|service started/,
    );

    process.kill(stack.process.pid!, "SIGTERM");
    await stack.exited;
    await expectAllStopped([runner, ...children]);
    expect(stack.output()).not.toContain("a stack process exited");
    // Its last line says it has stopped, once every process has.
    const last = stack.output().trim().split("\n").at(-1)!;
    expect(JSON.parse(last)).toMatchObject({
      service: "devstack",
      msg: "stack stopped",
      code: 0,
      processes: 7,
    });
  }, 120_000);

  it("SIGINT to the pnpm process alone (not its process group) stops the stack, and LOG_LEVEL=warn still says when it was ready", async () => {
    stack = await startStack(await freshEnv({ LOG_LEVEL: "warn" }));
    const { runner, children } = await stackProcesses(stack);
    process.kill(stack.process.pid!, "SIGINT");
    await stack.exited;
    await expectAllStopped([runner, ...children]);
  }, 120_000);

  it("kill -9 of the process that runs the stack leaves none of the stack's processes running", async () => {
    stack = await startStack(await freshEnv());
    const { runner, children } = await stackProcesses(stack);
    process.kill(runner, "SIGKILL");
    await expectAllStopped(children);
  }, 120_000);

  // One stack for both (a start is seconds of CPU): what it serves, then how it ends.
  it("with no model provider configured, answers model echo (and auto) through its development provider, JSON and streamed, and embeds with text-embedding-3-small; the models say owned_by development; then kill -9 of the pnpm process stops the stack too", async () => {
    const env = await freshEnv();
    stack = await startStack(env);
    const started = /^.*development model provider started.*$/m.exec(stack.output())?.[0];
    expect(JSON.parse(started!)).toMatchObject({
      url: `http://127.0.0.1:${env.DEVELOPMENT_PROVIDER_PORT}/v1`,
      models: ["echo", "text-embedding-3-small", "auto"],
    });
    const { key } = await createKey(env, { org: "acme", owner: "backend" });
    const call = (path: string, body?: unknown) =>
      fetch(`${stack!.gatewayUrl}/api/v1/llm${path}`, {
        method: body ? "POST" : "GET",
        headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
        ...(body ? { body: JSON.stringify(body) } : {}),
      });
    /** The JSON events of a streamed answer. */
    const events = async (res: Response) => {
      expect(res.status).toBe(200);
      return (await res.text())
        .split("\n")
        .filter((line) => line.startsWith("data: ") && line !== "data: [DONE]")
        .map((line) => JSON.parse(line.slice("data: ".length)));
    };

    expect(await (await call("/models")).json()).toEqual({
      object: "list",
      data: [
        { id: "echo", object: "model", created: 0, owned_by: "development" },
        { id: "text-embedding-3-small", object: "model", created: 0, owned_by: "development" },
      ],
    });
    const embedded = await call("/embeddings", {
      model: "text-embedding-3-small",
      input: ["vector stores on a fresh machine", "a fresh machine"],
    });
    expect(embedded.status).toBe(200);
    const vectors = (await embedded.json()).data.map((d: { embedding: number[] }) => d.embedding);
    expect(vectors.map((v: number[]) => v.length)).toEqual([256, 256]);
    expect(
      vectors[0].reduce((sum: number, x: number, i: number) => sum + x * vectors[1][i], 0),
    ).toBeGreaterThan(0.5);
    for (const model of ["echo", "auto"]) {
      const response = await call("/responses", { model, input: "hello" });
      expect(response.status).toBe(200);
      expect(await response.json()).toMatchObject({
        status: "completed",
        model: "echo",
        output: [{ type: "message", content: [{ type: "output_text", text: "hello" }] }],
        usage: { output_tokens: 2 },
      });
    }
    const streamed = await events(
      await call("/responses", { model: "echo", input: "hello there", stream: true }),
    );
    expect(
      streamed
        .filter((e) => e.type === "response.output_text.delta")
        .map((e) => e.delta)
        .join(""),
    ).toBe("hello there");
    expect(streamed.at(-1)).toMatchObject({ type: "response.completed", response: { status: "completed" } });

    const messages = [{ role: "user", content: "hi from chat" }];
    const completion = await call("/chat/completions", { model: "echo", messages });
    expect(completion.status).toBe(200);
    expect(await completion.json()).toMatchObject({
      object: "chat.completion",
      choices: [{ message: { role: "assistant", content: "hi from chat" }, finish_reason: "stop" }],
    });
    const chunks = await events(
      await call("/chat/completions", {
        model: "echo",
        messages,
        stream: true,
        stream_options: { include_usage: true },
      }),
    );
    expect(chunks.map((c) => c.choices[0]?.delta?.content ?? "").join("")).toBe("hi from chat");
    expect(chunks.at(-1).usage).toMatchObject({ completion_tokens: 5 });

    // A model it does not serve is the service's refusal, not a call.
    expect((await call("/responses", { model: "gpt-4o", input: "hello" })).status).toBe(422);

    const { runner, children } = await stackProcesses(stack);
    process.kill(stack.process.pid!, "SIGKILL");
    await expectAllStopped([runner, ...children]);
    expect(stack.output()).toContain("the process that ran the stack is gone; stopping the stack");
  }, 120_000);

  it("NODE_ENV=production with no model provider and no vault keys: exits 78 naming LLM_BASE_URL and VAULT_KEYS, before starting anything", async () => {
    const env: NodeJS.ProcessEnv = { ...(await freshEnv()), NODE_ENV: "production" };
    delete env.VAULT_KEYS;
    // Bounded: a stack that started instead would run until stopped (killing pnpm stops it).
    const failed = await failedStart(env, 30_000);
    expect(failed?.code).toBe(78);
    expect(failed!.stderr).toMatch(
      /^Invalid configuration:\n {2}- LLM_BASE_URL: required with NODE_ENV=production .*development model provider/m,
    );
    // The vault too: pnpm start would otherwise make a development key for production.
    expect(failed!.stderr).toMatch(/^ {2}- VAULT_KEYS: required in production \(NODE_ENV=production\)/m);
    expect(failed!.stdout + failed!.stderr).not.toMatch(/started|\n\s+at /);
  }, 60_000);

  it("a store that fails while the others start (a PostgreSQL cluster it cannot open): the others are stopped, exit 1", async () => {
    const env = await freshEnv();
    // Stores start at once: this one fails while redis-server, SpiceDB, PGlite and the provider start.
    await writeFile(join(env.DATA_DIR!, "postgres", "PG_VERSION"), "9\n");
    const failed = await failedStart(env, 90_000);
    expect(failed?.code).toBe(1);
    const lines = failed!.stdout
      .split("\n")
      .filter((l) => l.startsWith("{"))
      .map((l) => JSON.parse(l) as { msg: string; err?: string; processes?: unknown });
    expect(lines.find((l) => l.msg === "stack failed to start")?.err).toMatch(/postgres exited with code 1/);
    expect(lines.at(-1)).toMatchObject({ msg: "stack stopped", processes: 4 });
    for (const port of [
      env.LOCAL_REDIS_PORT,
      env.SPICEDB_LOCAL_PORT,
      env.LOCAL_VECTOR_DATABASE_PORT,
      env.DEVELOPMENT_PROVIDER_PORT,
    ])
      expect(await acceptsConnections(Number(port)), `port ${port}`).toBe(false);
  }, 120_000);

  it("a setting that is not a port (SERVICE_PORT=abc): exits 78 naming the variable, before starting anything", async () => {
    const env = { ...(await freshEnv()), SERVICE_PORT: "abc" };
    const failed = await failedStart(env);
    expect(failed?.code).toBe(78);
    expect(failed!.stderr).toMatch(
      /^Invalid configuration:\n {2}- SERVICE_PORT: "abc" is not a port \(a whole number from 0 to 65535\)$/m,
    );
    expect(failed!.stdout + failed!.stderr).not.toMatch(/started|options\.port|\n\s+at /);
  }, 60_000); // pnpm and Node's start take seconds on a loaded machine

  it("one port given to two parts (SERVICE_PORT = PORT): says so with both settings, before starting anything", async () => {
    const base = await freshEnv();
    const env = { ...base, SERVICE_PORT: base.PORT };
    const failed = await failedStart(env);
    expect(failed?.code).toBe(1);
    expect(onlyLogLine(failed)).toMatchObject({
      msg: "stack failed to start",
      err: `port ${base.PORT} is given to both the service (SERVICE_PORT) and the gateway (PORT): give each its own`,
    });
    expect(failed!.stdout + failed!.stderr).not.toMatch(/EADDRINUSE|\n\s+at /);
  }, 60_000);

  it("a bad setting of the service (RESPONSE_RETENTION=abc): exits 78 with the service's own naming of it", async () => {
    // The stores start before the service refuses its setting: the worker's vector database stands in for one.
    const env = { ...(await freshEnv(await workerVectors())), RESPONSE_RETENTION: "abc" };
    const failed = await failedStart(env);
    expect(failed?.code).toBe(78);
    expect(failed!.stdout).toMatch(/RESPONSE_RETENTION: \\"abc\\": expected a duration with a unit/);
    expect(failed!.stdout + failed!.stderr).not.toMatch(/stack is ready|\n\s+at /);
  }, 120_000);

  it("with the gateway's port taken, says so with the setting to change, before starting anything", async () => {
    const taken = createServer();
    await new Promise<void>((resolve) => taken.listen(0, "127.0.0.1", resolve));
    const port = (taken.address() as { port: number }).port;
    try {
      const env = { ...(await freshEnv()), PORT: String(port) };
      const failed = await failedStart(env);
      expect(failed?.code).toBe(1);
      expect(onlyLogLine(failed)).toMatchObject({
        msg: "stack failed to start",
        err: expect.stringContaining(`port ${port} (the gateway) is in use: set PORT`),
      });
      expect(failed!.stdout + failed!.stderr).not.toMatch(/EADDRINUSE|\n\s+at /);
    } finally {
      taken.close();
    }
  }, 60_000);
});
