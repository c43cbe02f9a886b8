import { type ChildProcess, spawn } from "node:child_process";
import { resolve } from "node:path";
import { afterEach, describe, expect, it } from "vitest";

const FIXTURE = resolve(import.meta.dirname, "fixtures/shutdown.ts");
const started: ChildProcess[] = [];

/** The fixture, once it has set up its handlers. */
async function start(env: Record<string, string>): Promise<ChildProcess> {
  const child = spawn(process.execPath, [FIXTURE], {
    env: { ...process.env, ...env },
    stdio: ["ignore", "pipe", "inherit"],
  });
  started.push(child);
  await new Promise<void>((ready) => child.stdout!.once("data", () => ready()));
  return child;
}

/** Its exit code, or "running" if it has not exited within `ms`. */
function exitWithin(child: ChildProcess, ms: number): Promise<number | "running"> {
  if (child.exitCode !== null) return Promise.resolve(child.exitCode);
  return new Promise((answer) => {
    const timer = setTimeout(() => answer("running"), ms);
    child.once("exit", (code) => {
      clearTimeout(timer);
      answer(code ?? -1);
    });
  });
}

afterEach(() => {
  for (const child of started.splice(0)) child.kill("SIGKILL");
});

describe("onShutdown", () => {
  it("exits 0 once the shutdown has finished", async () => {
    const child = await start({ HANG: "0", DEADLINE_MS: "60000" });
    child.kill("SIGTERM");
    expect(await exitWithin(child, 10_000)).toBe(0);
  });

  it("a shutdown that hangs: the process waits for it, until a second signal ends it with code 1", async () => {
    const child = await start({ HANG: "1", DEADLINE_MS: "60000" });
    child.kill("SIGTERM");
    expect(await exitWithin(child, 500)).toBe("running");
    child.kill("SIGTERM");
    expect(await exitWithin(child, 10_000)).toBe(1);
  });

  it("a shutdown that hangs past its deadline ends the process with code 1", async () => {
    const child = await start({ HANG: "1", DEADLINE_MS: "300" });
    child.kill("SIGINT");
    expect(await exitWithin(child, 10_000)).toBe(1);
  });
});
