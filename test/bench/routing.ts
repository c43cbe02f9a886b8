/**
 * What routing model names through the catalogue costs: one routing
 * decision on its own (a micro-benchmark, in this process), and a model call
 * with one deployment through this code beside the same call through the
 * code before the router (`BENCH_BASELINE`, a git revision: baseline.ts).
 *
 * Alone: `BENCH_BASELINE=<rev> pnpm exec node test/bench/routing.ts`
 * (prints; `BENCH_OUTPUT` writes a report). `BENCH_MODEL_CALLS`,
 * `BENCH_MODEL_SECONDS` size it as they size the model-call benchmark.
 */
import { ManualClock } from "@gw/core/clock";
import { ids } from "../../packages/service/src/ids.ts";
import { Catalogue, type CatalogueModel, type Deployment } from "../../packages/service/src/llm/catalogue.ts";
import { NO_COOLDOWNS } from "../../packages/service/src/llm/cooldowns.ts";
import type { Completion, ModelProvider } from "../../packages/service/src/llm/provider.ts";
import { ModelRouter, pickDeployment } from "../../packages/service/src/llm/router.ts";
import { besideRevision } from "./baseline.ts";
import { Report } from "./report.ts";

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

export async function benchRouting(report: Report): Promise<void> {
  await decisionCost(report);
  const rev = process.env.BENCH_BASELINE;
  if (rev)
    await besideRevision(report, rev, {
      title: `Model calls with one deployment: this code beside the code before the router (${rev})`,
      setting:
        "one from `" +
        rev +
        "` (one upstream, `LLM_BASE_URL`) and one from this checkout (the same settings: the catalogue's shorthand, one deployment, routed by the router)",
    });
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
