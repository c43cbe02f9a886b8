import { type ChildProcess, spawn } from "node:child_process";
import { once } from "node:events";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { runToExit, survivors } from "../src/processes.ts";

const started: ChildProcess[] = [];
const sleeper = () => {
  const child = spawn("sleep", ["30"], { stdio: "ignore" });
  started.push(child);
  return child;
};
const stopped = async (child: ChildProcess) => {
  if (child.exitCode === null && child.signalCode === null) {
    child.kill("SIGKILL");
    await once(child, "exit");
  }
};

afterEach(async () => {
  for (const child of started.splice(0)) await stopped(child);
});

describe("survivors", () => {
  it("names a process that outlives the wait by its pid and command line, and none that has ended", async () => {
    const lasting = sleeper();
    const ending = sleeper();
    const left = survivors([lasting.pid!, ending.pid!], 300);
    await stopped(ending);
    // With what it is doing: `sleep` waits in the kernel, asleep, on its one thread.
    expect(await left).toEqual([
      expect.stringMatching(
        new RegExp(`^${lasting.pid} sleep 30 \\(state S, waiting in \\S+, threads sleep:S\\)$`),
      ),
    ]);
  });

  it("does not take a new process given a dead one's pid (the kernel's pids wrapped) for a survivor", async () => {
    // The process table as the kernel would show it: pid 4242 ends after two looks, and the kernel
    // hands its pid to a new process (another start time); 4343 runs on. Made up whole: these pids
    // may name real processes on a busy machine (one was a gateway of a stack running beside the suite).
    let looks = 0;
    const table = {
      startTime: (pid: number) => {
        if (pid === 4343) return "500";
        looks++;
        return looks <= 2 ? "100" : "900";
      },
      commandLine: (pid: number) => (pid === 4343 ? "sleep 500" : "a new process"),
    };
    expect(await survivors([4242], 5_000, table)).toEqual([]);
    expect(looks).toBeLessThan(5);
    // Beside one that outlives the wait: that one only.
    looks = 0;
    expect(await survivors([4242, 4343], 200, table)).toEqual(["4343 sleep 500"]);
    // One whose command line is gone by the time it is named.
    looks = 0;
    expect(await survivors([4242, 4343], 200, { ...table, commandLine: () => undefined })).toEqual([
      "4343 (gone)",
    ]);
  });
});

describe("runToExit", () => {
  it("runs in a suite that has a compile cache (vitest.config.ts)", () => {
    expect(process.env.NODE_COMPILE_CACHE).toMatch(/node-compile$/);
  });

  const scripts: string[] = [];
  const script = async (source: string) => {
    const dir = await mkdtemp(join(tmpdir(), "gw-run-to-exit-"));
    scripts.push(dir);
    const path = join(dir, "entry.mjs");
    await writeFile(path, source);
    return path;
  };
  afterEach(async () => {
    for (const dir of scripts.splice(0)) await rm(dir, { recursive: true, force: true });
  });

  it("gives an entry's exit code and what it wrote, with only the environment it is given and the run's compile cache", async () => {
    const entry = await script(
      "const { GIVEN, HOME, NODE_COMPILE_CACHE } = process.env;" +
        "process.stdout.write([GIVEN, HOME, NODE_COMPILE_CACHE].join(' '));" +
        "process.stderr.write('said'); process.exit(78);",
    );
    expect(await runToExit(entry, { GIVEN: "yes" })).toEqual({
      code: 78,
      signal: null,
      stdout: `yes  ${process.env.NODE_COMPILE_CACHE}`,
      stderr: "said",
    });
  });

  it("names what an entry that does not exit waits on, from its diagnostic report, and kills it", async () => {
    const entry = await script(
      "process.stderr.write('started\\n');" +
        "const server = (await import('node:net')).createServer().listen(0, '127.0.0.1');" +
        "await new Promise(function waitingForever() {});",
    );
    const failure = await runToExit(entry, {}, 1_000).then(
      () => undefined,
      (err: Error) => err,
    );
    expect(failure?.message).toMatch(/entry\.mjs had not exited after 1000 ms\.\nIts stderr: "started\\n"\n/);
    // The listening socket it holds, by its type and address.
    expect(failure?.message).toMatch(/What its event loop waited on:\n.*"type":"tcp".*"localEndpoint"/);
  });
});
