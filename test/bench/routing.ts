/**
 * What routing model names through the catalogue costs: one routing
 * decision on its own (a micro-benchmark, in this process), and a model call
 * with one deployment through this code beside the same call through the
 * code before the router (`BENCH_BASELINE`, a git revision: its tree is
 * unpacked beside this checkout, sharing its node_modules), both pairs of
 * gateway and service on one Redis, PostgreSQL, local SpiceDB and fake
 * provider, calls alternating direct, before, after; then CPU per call at
 * 16 connections, rounds alternating.
 *
 * Alone: `BENCH_BASELINE=<rev> pnpm exec node test/bench/routing.ts`
 * (prints; `BENCH_OUTPUT` writes a report). `BENCH_MODEL_CALLS`,
 * `BENCH_MODEL_SECONDS` size it as they size the model-call benchmark.
 */
import { execFile } from "node:child_process";
import { cp, mkdtemp, readdir, rm, stat, symlink } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { ManualClock } from "@gw/core/clock";
import { REPO_ROOT } from "@gw/devstack";
import { ids } from "../../packages/service/src/ids.ts";
import { Catalogue, type CatalogueModel, type Deployment } from "../../packages/service/src/llm/catalogue.ts";
import { NO_COOLDOWNS } from "../../packages/service/src/llm/cooldowns.ts";
import type { Completion, ModelProvider } from "../../packages/service/src/llm/provider.ts";
import { ModelRouter, pickDeployment } from "../../packages/service/src/llm/router.ts";
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

function deployment(model: string, index: number, priority: number, weight: number): Deployment {
  return {
    id: `${model}#${index}`,
    modelName: model,
    index,
    provider: "openai",
    baseUrl: "http://127.0.0.1:9/v1",
    apiKey: "sk-bench",
    upstreamModel: `${model}-${index}`,
    weight,
    priority,
    timeoutMs: 60_000,
    price: { input: 2.5, cachedInput: 1.25, output: 10 },
    apiVersion: undefined,
    byok: false,
  };
}

/** Microseconds per call of `fn` over `n` calls, after `n / 10` to warm up. */
async function perCall(n: number, fn: () => unknown): Promise<number> {
  for (let i = 0; i < n / 10; i++) await fn();
  const started = performance.now();
  for (let i = 0; i < n; i++) await fn();
  return ((performance.now() - started) * 1000) / n;
}

/** One routing decision, and the router's whole part of a call around an adapter that answers at once. */
async function decisionCost(report: Report): Promise<void> {
  const one = [deployment("m", 0, 0, 1)];
  const four = [
    deployment("m", 0, 0, 3),
    deployment("m", 1, 0, 1),
    deployment("m", 2, 1, 1),
    deployment("m", 3, 1, 2),
  ];
  const notTried = new Set(["m#0"]);
  const instant: Completion = {
    text: "ok",
    toolCalls: [],
    finishReason: "stop",
    model: "m",
    usage: { input_tokens: 10, output_tokens: 2, total_tokens: 12 },
    usageDetails: { cachedTokens: 0, reasoningTokens: 0 },
  };
  const adapter: ModelProvider = {
    complete: async () => instant,
    async *stream() {
      yield instant.text;
      return instant;
    },
  };
  const routerOf = (deployments: Deployment[]) => {
    const model: CatalogueModel = { name: "m", fallbacks: [], deployments, canCool: deployments.length > 1 };
    const clock = new ManualClock();
    return new ModelRouter({
      catalogue: new Catalogue({ models: [model] }),
      adapters: { openai: () => adapter, azure: () => adapter, anthropic: () => adapter },
      adapterOptions: { maxResponseBytes: 1 << 20, maxEventChars: 1 << 16, ids: ids(clock) },
      cooldowns: NO_COOLDOWNS,
      clock,
      random: Math.random,
      settings: { deadlineMs: 60_000, backoffMs: 100, retryAfterMaxMs: 60_000 },
    });
  };
  const request = { model: "m", messages: [{ role: "user" as const, content: "hello" }] };
  const signal = new AbortController().signal;
  const [single, several] = [routerOf(one), routerOf(four)];
  const rows: [string, number][] = [
    [
      "choice among 1 deployment",
      await perCall(1_000_000, () => pickDeployment(one, () => true, Math.random)),
    ],
    [
      "choice among 4 deployments in 2 priorities, 1 already tried",
      await perCall(1_000_000, () => pickDeployment(four, (d) => !notTried.has(d.id), Math.random)),
    ],
    [
      "a whole routed call, 1 deployment (no shared state read)",
      await perCall(200_000, () => single.complete(request, signal)),
    ],
    [
      "a whole routed call, 4 deployments (shared state read from memory)",
      await perCall(200_000, () => several.complete(request, signal)),
    ],
  ];
  report.section(
    "Model routing: one decision",
    "In this process, on the router's own code: a weighted choice by priority (`pickDeployment`), and a whole call through `ModelRouter` (its route, deadline timer, signals, choice, the request for the deployment and the completion with the deployment that served it) around an adapter that answers at once and a cooldown state in memory (a real one is a Redis script, read only for names that can cool down). Goal: a routing decision under 0.05 ms (50 µs).",
  );
  report.table(
    ["", "per decision"],
    rows.map(([name, us]) => [name, `${us.toFixed(3)} µs`]),
  );
}

/**
 * The tree of `rev` unpacked in a directory of its own, sharing this
 * checkout's installed packages (the root's `node_modules`, and each
 * package's links into it): the code before a change, runnable beside it.
 */
async function checkoutOf(rev: string): Promise<{ root: string; remove: () => Promise<void> }> {
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

/** One deployment, through this code and through `rev`'s, side by side. */
async function beforeAndAfter(report: Report, rev: string): Promise<void> {
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
    const cpu = { before: [] as number[], after: [] as number[] };
    for (let round = 0; round < 2; round++)
      for (const [name, pair] of [
        ["before", before],
        ["after", after],
      ] as const)
        cpu[name].push((await cpuPerCall(stack, pair, CHAT, chatBody(), stack.plainKey)).total);
    const mean = (v: number[]) => v.reduce((s, x) => s + x, 0) / v.length;
    report.section(
      `Model calls with one deployment: this code beside the code before the router (${rev})`,
      `Two gateway and service pairs, one from \`${rev}\` (one upstream, \`LLM_BASE_URL\`) and one from this checkout (the same settings: the catalogue's shorthand, one deployment, routed by the router), on one Redis, PostgreSQL, local SpiceDB and fake provider; calls alternating direct, before, after, ${CALLS} each after 20 warm-up calls, concurrency 1, p50 added beside the provider. Then CPU per chat completion (gateway + service + Redis, from /proc) at 16 connections, two rounds alternating, averaged. Goal: neither grows. On this shared machine a ratio within about ×0.85–×1.15 is noise.`,
    );
    report.table(["call", "direct (p50)", "added before", "added after", "after / before"], rows);
    report.table(
      ["CPU per chat completion (gateway + service + Redis)", "before", "after", "after / before"],
      [
        [
          "16 connections",
          ms(mean(cpu.before)),
          ms(mean(cpu.after)),
          ratio(mean(cpu.before), mean(cpu.after)),
        ],
      ],
    );
  } finally {
    await stack.close();
    await remove();
  }
}

export async function benchRouting(report: Report): Promise<void> {
  await decisionCost(report);
  const rev = process.env.BENCH_BASELINE;
  if (rev) await beforeAndAfter(report, rev);
  else
    report.line(
      "(The side-by-side run against the code before the router needs `BENCH_BASELINE=<git revision>`: skipped.)",
    );
}

if (import.meta.main) {
  const report = new Report();
  const startedAt = new Date();
  const { loadavg } = await import("node:os");
  const load0 = loadavg() as [number, number, number];
  await benchRouting(report);
  if (process.env.BENCH_OUTPUT) await report.write(process.env.BENCH_OUTPUT, startedAt, load0);
  process.exit(0);
}
