/**
 * What a model call's admission costs with token and spend budgets, beside
 * one with request windows only: the same Redis, the same concurrency; and
 * what counting a prompt costs, with the bound (`llm/tokens.ts`) beside the
 * tokenizer run over whole texts as before it, on ordinary and worst inputs.
 */
import { createRequire } from "node:module";
import type { Limits } from "@gw/core/limits";
import type { RedisClient } from "@gw/core/redis";
import { CountingWindows } from "@gw/core/windows";
import { RequestWindows } from "../../packages/gateway/src/rate-limit/request-windows.ts";
import type { ChatMessage } from "../../packages/service/src/llm/chat.ts";
import { countPromptTokens } from "../../packages/service/src/llm/tokens.ts";
import type { Report } from "./report.ts";

const PROMPT = [
  { role: "system" as const, content: "You are a helpful assistant. Answer briefly and cite what you use." },
  {
    role: "user" as const,
    content:
      "Summarise the trade-offs between fixed and sliding rate-limit windows for an API gateway that " +
      "fronts several model providers, with attention to bursts, fairness between tenants and cost.",
  },
];

export async function benchAdmission(
  md: Report,
  redis: RedisClient,
  measure: (op: (i: number) => Promise<unknown>) => Promise<number>,
): Promise<void> {
  const requestsOnly = { second: 1e9, minute: 1e9, hour: 1e9, day: 1e9 };
  const budgeted: Limits = {
    ...requestsOnly,
    tokens: { minute: 1e12, hour: 1e12, day: 1e12, month: 1e12 },
    spend: { day: 1e6, month: 1e6 },
    endUser: { tokens: { day: 1e12 } },
  };
  const windows = requestWindows(redis, "bench:adm-requests");
  const budgets = new CountingWindows(redis, { prefix: "bench:adm-budgets" });
  const reserveCounted = async (i: number, count: () => Promise<number>) => {
    const key = `k${i % 64}`;
    const tokens = (await count()) + 256;
    return budgets.reserve(
      key,
      budgets.counters(key, `u${i % 8}`, budgeted, { requests: 1, tokens, spend: 42_000 }),
      { lease: { onExpiry: { requests: 1, tokens: tokens - 256, spend: 20_000 } } },
    );
  };
  md.rates("Admission of a model call, 16 concurrent callers, Redis on loopback", [
    [
      "request windows only (4 windows, the gateway's script)",
      await measure((i) => windows.decide(`k${i % 64}`, requestsOnly)),
    ],
    [
      "requests, tokens, spend and an end user's tokens (11 windows, one script)",
      await measure((i) => {
        const key = `k${i % 64}`;
        return budgets.reserve(
          key,
          budgets.counters(key, `u${i % 8}`, budgeted, { requests: 1, tokens: 300, spend: 42_000 }),
        );
      }),
    ],
    [
      "the same, with the prompt counted by the tokenizer over whole texts (before the bound)",
      await measure((i) => reserveCounted(i, async () => wholeTextPrompt(PROMPT))),
    ],
    [
      "the same as a lease (indexed, then reserved), with the prompt counted piece by piece, bounded (llm/tokens.ts)",
      await measure((i) =>
        reserveCounted(i, () => countPromptTokens({ model: "gpt-4o-mini", messages: PROMPT })),
      ),
    ],
    [
      "the same, then settled with the provider's usage (index, 2 scripts, unindexed)",
      await measure(async (i) => {
        const result = await reserveCounted(i, () =>
          countPromptTokens({ model: "gpt-4o-mini", messages: PROMPT }),
        );
        if (result.admitted)
          await budgets.settle(result.reservation, { requests: 1, tokens: 120, spend: 9_000 });
      }),
    ],
  ]);
}

/** The gateway's request windows deciding every request in Redis (no leases): one script per decision. */
export function requestWindows(redis: RedisClient, prefix: string): RequestWindows {
  return new RequestWindows(new CountingWindows(redis, { prefix }), {
    leases: { share: 0, maxPoints: 0, maxMs: 0 },
  });
}

// The service's own gpt-tokenizer (a dependency of the service, not of these benchmarks).
const { countTokens: wholeText } = (await import(
  createRequire(new URL("../../packages/service/package.json", import.meta.url)).resolve(
    "gpt-tokenizer/encoding/o200k_base",
  )
)) as { countTokens: (text: string, options: { disallowedSpecial: Set<string> }) => number };

/** The count before the bound: gpt-tokenizer over each whole text, on the event loop. */
function wholeTextPrompt(messages: ChatMessage[]): number {
  return messages.reduce((n, m) => n + 4 + wholeText(m.content, { disallowedSpecial: new Set() }), 3);
}

/** Distinct CJK ideographs without spaces: one pre-tokenization piece, as long as the text. */
const cjk = (n: number) =>
  Array.from({ length: n }, (_, i) => String.fromCharCode(0x4e00 + ((i * 7919) % 20_000))).join("");

/**
 * The tokenizer's worst inputs: the time to count each, and the longest the
 * event loop was held meanwhile (its delay histogram's maximum), with the
 * bound beside the whole-text count before it (which is quadratic in a
 * piece: it is measured only up to 16k characters, and would take seconds
 * to minutes beyond).
 */
export async function benchTokenizerWorstCase(md: Report): Promise<void> {
  const inputs: [string, string, boolean][] = [
    ["16k CJK characters, no space", cjk(16_000), true],
    ["16k emoji, no space", "\u{1F600}".repeat(16_000), true],
    ["64k spaces", " ".repeat(64_000), true],
    ["100k CJK characters, no space", cjk(100_000), false],
    ["1 MiB of one rare character (ꙮ)", "ꙮ".repeat(349_525), false],
    ["1 MiB of emoji, no space", "\u{1F600}".repeat(262_144), false],
    [
      "1 MiB of 128-emoji words (the costliest pieces still encoded)",
      `${"\u{1F600}".repeat(128)} `.repeat(2_040),
      false,
    ],
    ["1 MiB of digits", "7".repeat(1 << 20), false],
    ["1 MiB of English", "The quick brown fox jumps over the lazy dog. ".repeat(23_302), false],
  ];
  const timed = async (count: () => number | Promise<number>) => {
    // The longest gap between two turns of a 1 ms timer: how long the loop was held (a histogram of
    // monitorEventLoopDelay would miss a count that never lets its timer fire).
    let last = performance.now();
    let heldMs = 0;
    const ticker = setInterval(() => {
      const now = performance.now();
      heldMs = Math.max(heldMs, now - last);
      last = now;
    }, 1);
    await new Promise((r) => setTimeout(r, 5));
    last = performance.now();
    const started = performance.now();
    const tokens = await count();
    const ms = performance.now() - started;
    await new Promise((r) => setTimeout(r, 5)); // the ticker sees the loop's last turn
    clearInterval(ticker);
    return { tokens, ms, heldMs };
  };
  const rows: (string | number)[][] = [];
  for (const [name, text, beforeToo] of inputs) {
    const messages: ChatMessage[] = [{ role: "user", content: text }];
    const bounded = await timed(() => countPromptTokens({ model: "gpt-4o", messages }));
    const before = beforeToo ? await timed(() => wholeTextPrompt(messages)) : undefined;
    rows.push([
      name,
      before
        ? `${before.ms.toFixed(0)} ms (loop held ${before.heldMs.toFixed(0)} ms), ${before.tokens}`
        : "not run",
      `${bounded.ms.toFixed(0)} ms (loop held ${bounded.heldMs.toFixed(0)} ms), ${bounded.tokens}`,
    ]);
  }
  md.section(
    "Counting a prompt's tokens: worst inputs (o200k_base)",
    "Time to count, the longest the event loop was held meanwhile, and the count. Before: gpt-tokenizer over the whole text on the event loop. With the bound: the encoding's own pieces, each up to 256 characters encoded (longer ones count as their UTF-8 bytes), the loop handed back every 8k characters.",
  );
  md.table(["input", "before (whole text)", "with the bound"], rows);
}
