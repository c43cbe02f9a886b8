import { type ChildProcess, spawn } from "node:child_process";
import { once } from "node:events";
import { writeFileSync } from "node:fs";
import { afterEach, describe, expect, it } from "vitest";
import { processRunning, survivors } from "../src/processes.ts";

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
    expect(await left).toEqual([`${lasting.pid} sleep 30`]);
  });

  it("does not take a new process given a dead one's pid (the kernel's pids wrapped) for a survivor", async () => {
    const first = sleeper();
    const pid = first.pid!;
    const left = survivors([pid], 5_000);
    // Its start time and the next one's are whole clock ticks apart.
    await new Promise((r) => setTimeout(r, 50));
    await stopped(first);
    expect(processRunning(pid)).toBe(false);
    // Forces the reuse: the kernel gives the next process the pid after ns_last_pid (as root). Another
    // process of the machine may take it first; then the one started here is not it, and it tries again.
    let reused: ChildProcess | undefined;
    for (let attempt = 0; attempt < 50 && !reused; attempt++) {
      writeFileSync("/proc/sys/kernel/ns_last_pid", String(pid - 1));
      const next = sleeper();
      if (next.pid === pid) reused = next;
      else await stopped(next);
    }
    expect(reused?.pid, "a new process was given the dead one's pid").toBe(pid);
    expect(processRunning(pid)).toBe(true);
    expect(await left).toEqual([]);
  });
});
