import { type ChildProcess, spawn } from "node:child_process";
import { once } from "node:events";
import { resolve } from "node:path";
import { afterEach, describe, expect, it } from "vitest";

const FIXTURE = resolve(import.meta.dirname, "fixtures/log-then-exit.ts");
const started: ChildProcess[] = [];

afterEach(() => {
  for (const child of started.splice(0)) if (child.exitCode === null) child.kill("SIGKILL");
});

describe("the default log destination", () => {
  it("lets a process exit whose output no one reads any more (a broken pipe), dropping what is left", async () => {
    // What pnpm start's processes met when its runner was killed: sonic-boom's flush on exit retried the
    // EPIPE write forever, and the process never ended.
    const child = spawn(process.execPath, [FIXTURE], { stdio: ["ignore", "pipe", "inherit", "ipc"] });
    started.push(child);
    await once(child, "message");
    child.stdout!.destroy();
    child.send("log and exit");
    let timer: NodeJS.Timeout | undefined;
    const [code, signal] = await Promise.race([
      once(child, "exit"),
      new Promise<never>((_, reject) => {
        timer = setTimeout(
          () => reject(new Error(`still running 30 s after it was told to exit (pid ${child.pid})`)),
          30_000,
        );
      }),
    ]).finally(() => clearTimeout(timer));
    expect({ code, signal }).toEqual({ code: 0, signal: null });
  }, 60_000);
});
