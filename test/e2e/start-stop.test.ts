import { execFile } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { REPO_ROOT } from "@gw/devstack";
import { acceptsConnections, survivors } from "@gw/test-kit";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { type RunningStack, seedPostgres, stackEnv, startStack } from "./pnpm-start.ts";

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

describe("pnpm start stops as one, whichever of its processes is told to", () => {
  const dirs: string[] = [];
  let stack: RunningStack | undefined;
  const freshEnv = async (extra: NodeJS.ProcessEnv = {}) => {
    const dir = await mkdtemp(join(tmpdir(), "gw-start-stop-"));
    dirs.push(dir);
    await seedPostgres(dir);
    return stackEnv(dir, extra);
  };
  afterEach(async () => {
    await stack?.interrupt();
    stack = undefined;
  });
  afterAll(async () => {
    for (const dir of dirs) await rm(dir, { recursive: true, force: true, maxRetries: 10, retryDelay: 200 });
  });

  it("kill -TERM of the pnpm process stops every process of the stack; meanwhile a second start names the ports in use and starts nothing", async () => {
    const env = await freshEnv();
    stack = await startStack(env);
    const { runner, children } = await stackProcesses(stack);
    expect(children).toHaveLength(5); // redis-server, postgres, spicedb-local, service, gateway

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
    expect(second.output).toContain(`port ${env.PORT} (the gateway) is in use: set PORT`);
    expect(second.output).not.toMatch(
      /redis-server started|PostgreSQL started|SpiceDB started|service started/,
    );

    process.kill(stack.process.pid!, "SIGTERM");
    await stack.exited;
    expect(await survivors([runner, ...children])).toEqual([]);
    expect(stack.output()).not.toContain("a stack process exited");
    // Its last line says it has stopped, once every process has.
    const last = stack.output().trim().split("\n").at(-1)!;
    expect(JSON.parse(last)).toMatchObject({
      service: "devstack",
      msg: "stack stopped",
      code: 0,
      processes: 5,
    });
  }, 120_000);

  it("SIGINT to the pnpm process alone (not its process group) stops the stack, and LOG_LEVEL=warn still says when it was ready", async () => {
    stack = await startStack(await freshEnv({ LOG_LEVEL: "warn" }));
    const { runner, children } = await stackProcesses(stack);
    process.kill(stack.process.pid!, "SIGINT");
    await stack.exited;
    expect(await survivors([runner, ...children])).toEqual([]);
  }, 120_000);

  it("kill -9 of the process that runs the stack leaves none of the stack's processes running", async () => {
    stack = await startStack(await freshEnv());
    const { runner, children } = await stackProcesses(stack);
    process.kill(runner, "SIGKILL");
    expect(await survivors(children)).toEqual([]);
  }, 120_000);

  it("kill -9 of the pnpm process stops the stack too", async () => {
    stack = await startStack(await freshEnv());
    const { runner, children } = await stackProcesses(stack);
    process.kill(stack.process.pid!, "SIGKILL");
    expect(await survivors([runner, ...children])).toEqual([]);
    expect(stack.output()).toContain("the process that ran the stack is gone; stopping the stack");
  }, 120_000);

  it("a setting that is not a port (SERVICE_PORT=abc): exits 78 naming the variable, before starting anything", async () => {
    const env = { ...(await freshEnv()), SERVICE_PORT: "abc" };
    const failed = await run("pnpm", ["start"], { cwd: REPO_ROOT, env }).then(
      () => undefined,
      (err: { code: number; stdout: string; stderr: string }) => err,
    );
    expect(failed?.code).toBe(78);
    expect(failed!.stderr).toMatch(/^Invalid configuration:\n {2}- SERVICE_PORT: .*expected number/m);
    expect(failed!.stdout + failed!.stderr).not.toMatch(/started|options\.port|\n\s+at /);
  });

  it("with the gateway's port taken, says so with the setting to change, before starting anything", async () => {
    const taken = createServer();
    await new Promise<void>((resolve) => taken.listen(0, "127.0.0.1", resolve));
    const port = (taken.address() as { port: number }).port;
    try {
      const env = { ...(await freshEnv()), PORT: String(port) };
      const failed = await run("pnpm", ["start"], { cwd: REPO_ROOT, env }).then(
        () => undefined,
        (err: { code: number; stdout: string; stderr: string }) => err,
      );
      expect(failed?.code).toBe(1);
      const lines = failed!.stdout.split("\n").filter((l) => l.startsWith("{"));
      expect(lines).toHaveLength(1);
      expect(JSON.parse(lines[0]!)).toMatchObject({
        msg: "stack failed to start",
        err: expect.stringContaining(`port ${port} (the gateway) is in use: set PORT`),
      });
      expect(failed!.stdout + failed!.stderr).not.toMatch(/EADDRINUSE|\n\s+at /);
    } finally {
      taken.close();
    }
  });
});
