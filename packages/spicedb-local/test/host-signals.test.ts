import { execFile } from "node:child_process";
import { resolve } from "node:path";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { HOST_SIGNALS } from "../src/host-signals.ts";

const run = promisify(execFile);
const SRC = resolve(import.meta.dirname, "../src");

/**
 * In a fresh Node process: loads the engine's library (through `SpiceDBEngine.start`, or with a bare
 * `koffi.load`), starts an engine, then, once a SIGTERM handler is installed as a program would, prints
 * each thread's name and blocked signals (from /proc). Go's threads are the ones named like the main
 * thread, which started them.
 */
async function threadMasks(how: "engine" | "bare"): Promise<{ main: bigint; go: bigint[] }> {
  const script = `
    import { readdirSync, readFileSync } from "node:fs";
    import koffi from "koffi";
    import { findLibrary, SpiceDBEngine } from ${JSON.stringify(`${SRC}/engine.ts`)};
    if (${JSON.stringify(how)} === "bare") koffi.load(findLibrary());
    const engine = SpiceDBEngine.start();
    process.on("SIGTERM", () => {});
    await new Promise((r) => setTimeout(r, 200));
    const threads = readdirSync("/proc/self/task").map((tid) => ({
      tid: Number(tid),
      name: readFileSync("/proc/self/task/" + tid + "/comm", "utf8").trim(),
      blocked: /SigBlk:\\s*(\\w+)/.exec(readFileSync("/proc/self/task/" + tid + "/status", "utf8"))[1],
    }));
    engine.dispose();
    console.log(JSON.stringify({ pid: process.pid, threads }));
  `;
  const { stdout } = await run(process.execPath, ["--input-type=module", "-e", script], {
    cwd: resolve(import.meta.dirname, ".."),
  });
  const { pid, threads } = JSON.parse(stdout.trim().split("\n").at(-1)!) as {
    pid: number;
    threads: { tid: number; name: string; blocked: string }[];
  };
  const main = threads.find((t) => t.tid === pid)!;
  const mask = (t: { blocked: string }) => BigInt(`0x${t.blocked}`);
  return {
    main: mask(main),
    go: threads.filter((t) => t.tid !== main.tid && t.name === main.name).map(mask),
  };
}

const all = HOST_SIGNALS.reduce((set, signal) => set | (1n << BigInt(signal - 1)), 0n);

describe.runIf(process.platform === "linux")("Node's signals and the engine's Go threads", () => {
  it("Go's threads block the signals Node handles (so Node's handlers never run on a goroutine's stack); the main thread still takes them", async () => {
    const { main, go } = await threadMasks("engine");
    expect(go.length, "the engine runs Go threads").toBeGreaterThan(0);
    for (const mask of go) expect(mask & all).toBe(all);
    expect(main & all).toBe(0n);
  });

  it("loaded without it, Go's threads take those signals (what the check above would catch)", async () => {
    const { go } = await threadMasks("bare");
    expect(go.length).toBeGreaterThan(0);
    for (const mask of go) expect(mask & all).toBe(0n);
  });
});
