/**
 * What guardrails add to a model call in the model-call pipeline, in this
 * process: the same call through `ModelGuardrails` (the input checked before
 * admission, the canary placed, the output checked whole, or a stream held
 * back and checked as it goes) beside the call without guardrails, against
 * an in-process provider that answers at once, so only the pipeline's own
 * work is timed. The default checks, the same set as test/bench/guardrails.ts
 * measures alone (every check type on the side it reads): an input guardrail
 * (100 banned words, `prompt_injection`, `secrets`, `pii`) and an output
 * guardrail (`secrets`, `pii`, `system_prompt_leakage`), over a 4 KB prompt
 * with a 1 KB system prompt and a 4 KB answer (streamed in 4-word pieces).
 * Goal: an added p50 under 0.2 ms.
 * The resolution of the attached guardrails (one Redis `GET` per call, the
 * policies cached) is not included.
 *
 * Alone: `pnpm exec node test/bench/guardrails-pipeline.ts` (prints;
 * `BENCH_OUTPUT` writes a report), or `BENCH_ONLY=guardrails pnpm bench`.
 */
import { pathToFileURL } from "node:url";
import { checksSchema, type Policy } from "@gw/core/guardrails";
import { createLogger } from "@gw/core/logger";
import { createMetrics } from "@gw/core/metrics";
import type { Principal } from "@gw/core/principal";
import { modelGuardrailsOf } from "../../packages/service/src/calls/deps.ts";
import type { GuardrailPolicy } from "../../packages/service/src/calls/guardrails.ts";
import type { ChatProvider, ChatRequest, Completion } from "../../packages/service/src/llm/provider.ts";
import { prose } from "./guardrails.ts";
import { Report } from "./report.ts";

const RUNS = Number(process.env.BENCH_GUARDRAIL_RUNS ?? 200) * 5;

const p50 = (samples: number[]) => [...samples].sort((a, b) => a - b)[samples.length >> 1]!;

function policy(id: string, checks: unknown[], applies_to: Policy["applies_to"]): GuardrailPolicy {
  return { id, name: id, checks: checksSchema.parse(checks), applies_to, action: "block" };
}

export async function benchGuardrailsPipeline(md: Report): Promise<void> {
  const banned = Array.from({ length: 100 }, (_, i) => `zq${i}xv`);
  const policies = [
    {
      ...policy(
        "gr_bench_in",
        [
          { type: "ban_words", words: banned },
          { type: "prompt_injection" },
          { type: "secrets" },
          { type: "pii" },
        ],
        "input",
      ),
      version: 1,
    },
    {
      ...policy(
        "gr_bench_out",
        [{ type: "secrets" }, { type: "pii" }, { type: "system_prompt_leakage" }],
        "output",
      ),
      version: 1,
    },
  ];
  const system = prose(1_000, 9);
  const prompt = prose(4_096, 3);
  const answer = prose(4_096, 13);
  const words = answer.split(/(?<= )/);
  const pieces: string[] = [];
  for (let i = 0; i < words.length; i += 4) pieces.push(words.slice(i, i + 4).join(""));
  const completion: Completion = {
    text: answer,
    toolCalls: [],
    finishReason: "stop",
    model: "bench",
    usage: { input_tokens: 1_000, output_tokens: 1_000, total_tokens: 2_000 },
    usageDetails: { cachedTokens: 0, reasoningTokens: 0 },
  };
  const provider = {
    complete: async () => ({ ...completion }),
    async *stream() {
      for (const piece of pieces) yield piece;
      return { ...completion };
    },
  } as unknown as ChatProvider;
  const guardrails = modelGuardrailsOf(
    { GUARDRAIL_STREAM_HOLDBACK_CHARS: 128, GUARDRAIL_JUDGE_TIMEOUT_MS: 10_000 },
    { metrics: createMetrics("bench"), logger: createLogger("bench", "silent"), audit: undefined as never },
    { source: { policiesFor: async () => policies }, audit: async () => undefined },
  );
  const principal = { org: "org-bench", keyId: "key_bench", user: "alice" } as Principal;
  const request = (): ChatRequest => ({
    model: "bench",
    messages: [
      { role: "system", content: system },
      { role: "user", content: prompt },
    ],
  });
  const signal = new AbortController().signal;
  const drain = async (p: ChatProvider, r: ChatRequest) => {
    const it = p.stream(r, signal);
    let step = await it.next();
    while (!step.done) step = await it.next();
    return step.value;
  };

  const plain = { json: [] as number[], stream: [] as number[] };
  const guarded = { json: [] as number[], stream: [] as number[] };
  for (let i = 0; i < RUNS; i++) {
    let t = performance.now();
    await provider.complete(request(), signal);
    plain.json.push(performance.now() - t);
    t = performance.now();
    const r1 = request();
    const g1 = await guardrails.forCall({ principal, requestId: "bench" }, r1);
    const c1 = await g1!.provider(provider).complete(r1, signal);
    guarded.json.push(performance.now() - t);
    if (c1.finishReason !== "stop")
      throw new Error("the bench's answer was blocked: its checks must pass it");

    t = performance.now();
    await drain(provider, request());
    plain.stream.push(performance.now() - t);
    t = performance.now();
    const r2 = request();
    const g2 = await guardrails.forCall({ principal, requestId: "bench" }, r2);
    const c2 = await drain(g2!.provider(provider), r2);
    guarded.stream.push(performance.now() - t);
    if (c2.finishReason !== "stop")
      throw new Error("the bench's stream was blocked: its checks must pass it");
  }
  md.section(
    "Guardrails: what the default checks add to a model call",
    `The model-call pipeline's guardrail stage (input checked before admission, canary placed, output checked whole or a stream of ${pieces.length} pieces held back and checked as it goes) beside the same call without guardrails, against an in-process provider that answers at once; the same default checks as above: an input guardrail (100 banned words, \`prompt_injection\`, \`secrets\`, \`pii\`) and an output guardrail (\`secrets\`, \`pii\`, \`system_prompt_leakage\`), a 4 KB prompt with a 1 KB system prompt, a 4 KB answer; ${RUNS} calls each, alternating; p50. Goal: added p50 under 0.2 ms. Not included: resolving the attached guardrails (one Redis \`GET\`).`,
  );
  md.table(
    ["call", "without guardrails", "with the default checks", "added p50"],
    (["json", "stream"] as const).map((kind) => [
      kind === "json" ? "JSON answer" : "streamed answer",
      `${p50(plain[kind]).toFixed(3)} ms`,
      `${p50(guarded[kind]).toFixed(3)} ms`,
      `${(p50(guarded[kind]) - p50(plain[kind])).toFixed(3)} ms`,
    ]),
  );
}

if (import.meta.url === pathToFileURL(process.argv[1]!).href) {
  const md = new Report();
  const startedAt = new Date();
  const { loadavg } = await import("node:os");
  const load = loadavg() as [number, number, number];
  await benchGuardrailsPipeline(md);
  if (process.env.BENCH_OUTPUT) await md.write(process.env.BENCH_OUTPUT, startedAt, load);
}
