import { type ChildProcess, execFile, spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdtemp, readdir, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { promisify } from "node:util";
import { freePort, REPO_ROOT } from "@gw/devstack";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

const run = promisify(execFile);

/** `pnpm start` as a user runs it, on free ports and a temporary data directory. */
describe("pnpm start", () => {
  let stack: ChildProcess;
  let output = "";
  let dataDir: string;
  let env: NodeJS.ProcessEnv;
  let gatewayUrl: string;

  beforeAll(async () => {
    dataDir = await mkdtemp(join(tmpdir(), "gw-stack-"));
    const [port, servicePort, redisPort] = [await freePort(), await freePort(), await freePort()];
    env = {
      PATH: process.env.PATH,
      PORT: String(port),
      SERVICE_PORT: String(servicePort),
      LOCAL_REDIS_PORT: String(redisPort),
      DATA_DIR: dataDir,
    };
    gatewayUrl = `http://127.0.0.1:${port}`;
    stack = spawn("pnpm", ["start"], {
      cwd: REPO_ROOT,
      env,
      stdio: ["ignore", "pipe", "pipe"],
      detached: true,
    });
    stack.stdout?.on("data", (c: Buffer) => (output += c));
    stack.stderr?.on("data", (c: Buffer) => (output += c));
    const deadline = Date.now() + 45_000;
    while (!output.includes("stack is up")) {
      if (stack.exitCode !== null || Date.now() > deadline)
        throw new Error(`stack did not come up:\n${output}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  });

  /** What Ctrl-C does in a terminal: SIGINT to the whole foreground process group. */
  async function interrupt(): Promise<void> {
    if (!stack?.pid || stack.exitCode !== null || stack.signalCode !== null) return;
    const exited = new Promise((r) => stack.once("exit", r));
    process.kill(-stack.pid, "SIGINT");
    await Promise.race([exited, new Promise((r) => setTimeout(r, 15_000))]);
    try {
      process.kill(-stack.pid, "SIGKILL");
    } catch {
      // the whole group is gone already
    }
  }

  afterAll(async () => {
    await interrupt();
    await rm(dataDir, { recursive: true, force: true });
  });

  it("serves the gateway; a key from `pnpm keys create` authenticates whoami", async () => {
    const { stdout } = await run("pnpm", ["keys", "create", "--org", "acme", "--owner", "alice"], {
      cwd: REPO_ROOT,
      env,
    });
    const created = JSON.parse(stdout);
    const res = await fetch(`${gatewayUrl}/api/v1/authentication/whoami`, {
      headers: { authorization: `Bearer ${created.key}` },
    });
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({ org: "acme", user: "alice", keyId: created.id });
    expect((await fetch(`${gatewayUrl}/readyz`)).status).toBe(200);
  });

  it("keeps Redis data under DATA_DIR/redis with AOF on, and never logs a secret", async () => {
    const { stdout } = await run("pnpm", ["keys", "create", "--org", "acme", "--owner", "bob"], {
      cwd: REPO_ROOT,
      env,
    });
    const { key } = JSON.parse(stdout);
    await fetch(`${gatewayUrl}/api/v1/authentication/whoami`, {
      headers: { authorization: `Bearer ${key}` },
    });
    const redisDir = resolve(dataDir, "redis");
    const entries = await readdir(redisDir, { recursive: true });
    expect(entries.some((e) => String(e).includes("appendonly"))).toBe(true);
    expect(output).toContain("in the data directory");
    expect(output).not.toContain(key);
  });

  it("stops every process it started on Ctrl-C", async () => {
    const pids = [...output.matchAll(/"pid":(\d+)/g)].map((m) => Number(m[1]));
    expect(pids.length).toBeGreaterThanOrEqual(3);
    await interrupt();
    const isAlive = (pid: number) => {
      try {
        process.kill(pid, 0);
        return true;
      } catch {
        return false;
      }
    };
    // pnpm itself may return before the processes it ran have finished shutting down.
    const deadline = Date.now() + 15_000;
    while (pids.some(isAlive) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
    expect(pids.filter(isAlive)).toEqual([]);
    expect(output).not.toContain("a stack process exited");
    expect(existsSync(resolve(dataDir, "redis"))).toBe(true);
  });
});
