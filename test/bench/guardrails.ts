/**
 * Guardrail checks in this process (pure functions, no I/O): 10,000 banned
 * entries over 100 KB of text beside the same list as one JavaScript regular
 * expression (what a first attempt would do), and the default checks over a
 * typical 4 KB prompt and answer. Goals: under 5 ms for the first, and the
 * checks' share of a model call's added p50 under 0.2 ms for the second.
 *
 * Alone: `pnpm exec node test/bench/guardrails.ts` (prints; `BENCH_OUTPUT`
 * writes a report), or `BENCH_ONLY=guardrails pnpm bench`.
 */
import { pathToFileURL } from "node:url";
import {
  type CheckInput,
  checksSchema,
  compile,
  evaluate,
  makeCanary,
  type Policy,
  withCanary,
} from "@gw/core/guardrails";
import { Report } from "./report.ts";

const RUNS = Number(process.env.BENCH_GUARDRAIL_RUNS ?? 200);

/** A fixed pseudo-random sequence, so every run reads the same text. */
function random(seed: number): () => number {
  let s = seed;
  return () => {
    s = (s * 1103515245 + 12345) & 0x7fffffff;
    return s / 0x7fffffff;
  };
}

const COMMON = (
  "the of and to in is it that for you was with on as have be at this are not but from or by one had " +
  "all your when can there use an each which do how their if will up other about out many then them these " +
  "so some her would make like him into time has look two more write go see number no way could people my " +
  "than first water been call who oil its now find long down day did get come made may part request model " +
  "please summary report customer order account data table function error value return result service"
).split(" ");

/** English-like prose of `chars` characters from common words, sentences and a little punctuation. */
export function prose(chars: number, seed = 7): string {
  const rnd = random(seed);
  let text = "";
  let sentence = 0;
  while (text.length < chars) {
    let w = COMMON[Math.floor(rnd() * COMMON.length)]!;
    if (sentence === 0) w = w[0]!.toUpperCase() + w.slice(1);
    text += w;
    sentence++;
    if (sentence > 8 && rnd() < 0.15) {
      text += rnd() < 0.8 ? ". " : rnd() < 0.5 ? "?\n" : ".\n\n";
      sentence = 0;
    } else text += rnd() < 0.08 ? ", " : " ";
  }
  return text.slice(0, chars);
}

/** `count` distinct banned entries that do not occur in `prose` (a fifth are two-word phrases), and a few that do. */
function bannedEntries(count: number): string[] {
  const rnd = random(11);
  const syllables = ["ka", "lo", "mi", "ren", "tu", "sa", "vel", "or", "an", "is", "ter", "po", "qua", "zim"];
  const word = () =>
    Array.from(
      { length: 2 + Math.floor(rnd() * 3) },
      () => syllables[Math.floor(rnd() * syllables.length)],
    ).join("");
  const entries = Array.from({ length: count - 3 }, (_, i) =>
    i % 5 === 0 ? `${word()} ${word()}` : `${word()}${i}`,
  );
  return [...entries, "customer order", "water", "return result"];
}

function p50(samples: number[]): number {
  const s = [...samples].sort((a, b) => a - b);
  return s[s.length >> 1]!;
}

function policy(id: string, checks: CheckInput[], applies_to: Policy["applies_to"]): Policy {
  return { id, version: 1, checks: checksSchema.parse(checks), applies_to, action: "block" };
}

export async function benchGuardrails(md: Report): Promise<void> {
  // 1. 10,000 banned entries over 100 KB.
  const text = prose(100_000);
  const entries = bannedEntries(10_000);
  const banPolicy = policy("gr_bench_ban", [{ type: "ban_words", words: entries }], "both");
  let t = performance.now();
  const compiled = compile(banPolicy);
  const compileMs = performance.now() - t;
  const escaped = entries.map((e) => e.replace(/[.*+?^${}()|[\]\\]/g, "\\$&").replace(/ /g, "\\s+"));
  t = performance.now();
  const naive = new RegExp(`\\b(?:${escaped.join("|")})\\b`, "gi");
  const naiveCompileMs = performance.now() - t;
  const ours: number[] = [];
  let found = 0;
  for (let i = 0; i < RUNS; i++) {
    t = performance.now();
    found = evaluate([compiled], text, { direction: "input" }).decisions[0]?.spans.length ?? 0;
    ours.push(performance.now() - t);
  }
  // The alternation tries every entry at every position: one run over 10 KB, scaled (it is linear in the text).
  const slice = text.slice(0, 10_000);
  t = performance.now();
  const naiveFound = slice.match(naive)?.length ?? 0;
  const naiveMs = ((performance.now() - t) * text.length) / slice.length;
  md.section(
    "Guardrails: 10,000 banned entries over 100 KB",
    `One \`ban_words\` check of 10,000 entries (a fifth two-word phrases) over 100 KB of English-like text, ${RUNS} runs each after compiling once, beside the same list as one JavaScript regular expression (an alternation with \`\\b\` and the \`i\` flag, which has no normalization: no look-alikes, no zero-width characters), run once over the first 10 KB and scaled to 100 KB, since it tries every entry at every position. p50. Goal: under 5 ms.`,
  );
  md.table(
    ["matcher", "compile (once)", "p50 per 100 KB", "spans found"],
    [
      [
        "`evaluate` (normalized words, one trie)",
        `${compileMs.toFixed(1)} ms`,
        `${p50(ours).toFixed(2)} ms`,
        found,
      ],
      [
        "one JavaScript RegExp alternation",
        `${naiveCompileMs.toFixed(1)} ms`,
        `${naiveMs.toFixed(0)} ms (scaled)`,
        `${naiveFound} in 10 KB`,
      ],
    ],
  );

  // 2. The default checks over a typical 4 KB prompt and its answer.
  const prompt = `${prose(3_500, 3)}\nMy e-mail is jo@example.org; the build fails with: TypeError: cannot read property 'x' of undefined.\n${prose(4_096 - 3_600, 5)}`;
  const canary = makeCanary();
  const system = withCanary(prose(1_000, 9), canary);
  const answer = prose(4_096, 13);
  const inputPolicy = policy(
    "gr_bench_in",
    [
      { type: "ban_words", words: entries.slice(0, 100) },
      { type: "prompt_injection" },
      { type: "secrets" },
      { type: "pii" },
    ],
    "input",
  );
  const outputPolicy = policy(
    "gr_bench_out",
    [{ type: "secrets" }, { type: "pii" }, { type: "system_prompt_leakage" }],
    "output",
  );
  const policies = [compile(inputPolicy), compile(outputPolicy)];
  const inputs: number[] = [];
  const outputs: number[] = [];
  for (let i = 0; i < RUNS * 5; i++) {
    t = performance.now();
    evaluate(policies, prompt, { direction: "input" });
    inputs.push(performance.now() - t);
    t = performance.now();
    evaluate(policies, answer, { direction: "output", instructions: [system], canary });
    outputs.push(performance.now() - t);
  }
  md.section(
    "Guardrails: the default checks over a 4 KB prompt and answer",
    `An input policy (100 banned words, \`prompt_injection\`, \`secrets\`, \`pii\`) over a 4 KB prompt, and an output policy (\`secrets\`, \`pii\`, \`system_prompt_leakage\` against a 1 KB system prompt with its canary) over a 4 KB answer, ${RUNS * 5} runs each, alternating; p50. What the checks themselves add to a model call; the call's whole added p50 with them attached is measured with the model calls (goal under 0.2 ms).`,
  );
  md.table(
    ["text", "checks", "p50"],
    [
      [
        "4 KB prompt (input)",
        "ban_words (100), prompt_injection, secrets, pii",
        `${p50(inputs).toFixed(3)} ms`,
      ],
      ["4 KB answer (output)", "secrets, pii, system_prompt_leakage", `${p50(outputs).toFixed(3)} ms`],
      ["both", "", `${(p50(inputs) + p50(outputs)).toFixed(3)} ms`],
    ],
  );
}

if (import.meta.url === pathToFileURL(process.argv[1]!).href) {
  const md = new Report();
  const startedAt = new Date();
  const { loadavg } = await import("node:os");
  const load = loadavg() as [number, number, number];
  await benchGuardrails(md);
  if (process.env.BENCH_OUTPUT) await md.write(process.env.BENCH_OUTPUT, startedAt, load);
}
