/**
 * Model calls through this code beside the same calls through the code of
 * another git revision (`BENCH_BASELINE`): its tree is unpacked beside this
 * checkout, sharing its node_modules, and both pairs of gateway and service
 * run on one Redis, PostgreSQL, local SpiceDB and fake provider, calls
 * alternating direct, before, after at concurrency 1; then CPU per call at
 * 16 connections, rounds alternating. How a change to the model-call path
 * is measured (BENCHMARKS.md keeps each change's figures).
 *
 * Alone: `BENCH_BASELINE=<rev> pnpm exec node test/bench/baseline.ts`
 * (prints; `BENCH_OUTPUT` writes a report). `BENCH_MODEL_CALLS`,
 * `BENCH_MODEL_SECONDS` size it as they size the model-call benchmark.
 */
import { execFile } from "node:child_process";
import { cp, mkdtemp, readdir, rm, stat, symlink } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { REPO_ROOT } from "@gw/devstack";
import {
  bearer,
  CHAT,
  chatBody,
  cpuPerCall,
  p50,
  RESPONSES,
  responseBody,
  startModelStack,
  timedCall,
} from "./model-calls.ts";
import { Report } from "./report.ts";

const run = promisify(execFile);
const CALLS = Number(process.env.BENCH_MODEL_CALLS ?? 300);

/**
 * The tree of `rev` unpacked in a directory of its own, sharing this
 * checkout's installed packages (the root's `node_modules`, and each
 * package's links into it): the code before a change, runnable beside it.
 */
export async function checkoutOf(rev: string): Promise<{ root: string; remove: () => Promise<void> }> {
  const root = await mkdtemp(join(tmpdir(), "gw-bench-baseline-"));
  await run("bash", ["-c", `git -C "${REPO_ROOT}" archive "${rev}" | tar -x -C "${root}"`]);
  await symlink(join(REPO_ROOT, "node_modules"), join(root, "node_modules"));
  for (const dir of ["packages", "test"]) {
    const parents = dir === "test" ? [""] : await readdir(join(REPO_ROOT, dir));
    for (const name of parents) {
      const from = join(REPO_ROOT, dir, name, "node_modules");
      if (!(await stat(from).catch(() => undefined))) continue;
      await cp(from, join(root, dir, name, "node_modules"), { recursive: true, verbatimSymlinks: true });
    }
  }
  return { root, remove: () => rm(root, { recursive: true, force: true }) };
}

const ms = (v: number) => `${v.toFixed(2)} ms`;
const ratio = (before: number, after: number) => `×${(after / Math.max(before, 1e-9)).toFixed(2)}`;

/** Model calls through this code and through `rev`'s, side by side; `setting` says how the two pairs are configured. */
export async function besideRevision(
  report: Report,
  rev: string,
  { title, setting, stored = false }: { title: string; setting: string; stored?: boolean },
): Promise<void> {
  const [{ root, remove }, stack] = await Promise.all([checkoutOf(rev), startModelStack()]);
  try {
    const before = await stack.startPair("before", {}, undefined, root);
    const after = await stack.startPair("after");
    const direct = (stream: boolean) => () =>
      timedCall(
        `${stack.providerUrl}/chat/completions`,
        { "content-type": "application/json" },
        chatBody(stream),
        stream,
      );
    const through =
      (url: string, path: string, body: string, stream = false) =>
      () =>
        timedCall(`${url}${path}`, bearer(stack.plainKey), body, stream);
    const rows: string[][] = [];
    for (const [name, path, body, stream] of [
      ["chat completion, not stored", CHAT, chatBody(), false],
      ["response, `store: false`", RESPONSES, responseBody(false), false],
      ["streamed chat completion, first byte", CHAT, chatBody(true), true],
      ...(stored ? ([["response, stored", RESPONSES, responseBody(true), false]] as const) : []),
    ] as const) {
      const calls = [
        direct(stream),
        through(before.gateway.url, path, body, stream),
        through(after.gateway.url, path, body, stream),
      ];
      const times: number[][] = [[], [], []];
      for (let i = 0; i < 20 + CALLS; i++)
        for (const [j, call] of calls.entries()) {
          const t = await call();
          if (i >= 20) times[j]!.push(t);
        }
      const [d, b, a] = times.map(p50) as [number, number, number];
      rows.push([name, ms(d), ms(b - d), ms(a - d), ratio(b - d, a - d)]);
    }
    // CPU per chat completion; with `stored`, per stored response too (SpiceDB's engine beside: it writes the owner).
    const loads = [
      ["chat completion, 16 connections", CHAT, chatBody()],
      ...(stored ? ([["stored response, 16 connections", RESPONSES, responseBody(true)]] as const) : []),
    ] as const;
    const cpuRows: string[][] = [];
    const mean = (v: number[]) => v.reduce((s, x) => s + x, 0) / v.length;
    for (const [name, path, body] of loads) {
      const cpu = {
        before: [] as number[],
        after: [] as number[],
        spiceBefore: [] as number[],
        spiceAfter: [] as number[],
      };
      for (let round = 0; round < 2; round++)
        for (const [side, pair] of [
          ["before", before],
          ["after", after],
        ] as const) {
          const measured = await cpuPerCall(stack, pair, path, body, stack.plainKey);
          cpu[side].push(measured.total);
          cpu[side === "before" ? "spiceBefore" : "spiceAfter"].push(measured.per.spicedb);
        }
      cpuRows.push([
        name,
        ms(mean(cpu.before)),
        ms(mean(cpu.after)),
        ratio(mean(cpu.before), mean(cpu.after)),
        `${ms(mean(cpu.spiceBefore))} → ${ms(mean(cpu.spiceAfter))}`,
      ]);
    }
    report.section(
      title,
      `Two gateway and service pairs, ${setting}, on one Redis, PostgreSQL, local SpiceDB and fake provider; calls alternating direct, before, after, ${CALLS} each after 20 warm-up calls, concurrency 1, p50 added beside the provider. Then CPU per chat completion${stored ? " and per stored response" : ""} (gateway + service + Redis, from /proc; the local SpiceDB's apart) at 16 connections, two rounds alternating, averaged. Goal: neither grows. On this shared machine a ratio within about ×0.85–×1.15 is noise.`,
    );
    report.table(["call", "direct (p50)", "added before", "added after", "after / before"], rows);
    report.table(
      [
        "CPU per call (gateway + service + Redis)",
        "before",
        "after",
        "after / before",
        "SpiceDB, before → after",
      ],
      cpuRows,
    );
  } finally {
    await stack.close();
    await remove();
  }
}

if (import.meta.main) {
  const rev = process.env.BENCH_BASELINE;
  if (!rev) throw new Error("BENCH_BASELINE=<git revision> names the code to compare with");
  const report = new Report();
  const startedAt = new Date();
  const { loadavg } = await import("node:os");
  const load0 = loadavg() as [number, number, number];
  await besideRevision(report, rev, {
    title: `Model calls: this code beside ${rev}`,
    setting: `one from \`${rev}\` and one from this checkout, with the same settings`,
    stored: true,
  });
  if (process.env.BENCH_OUTPUT) await report.write(process.env.BENCH_OUTPUT, startedAt, load0);
  process.exit(0);
}
