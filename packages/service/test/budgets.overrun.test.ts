import { randomBytes } from "node:crypto";
import type { Limits } from "@gw/core/limits";
import { CountingWindows } from "@gw/core/windows";
import { countTokens as o200k } from "gpt-tokenizer/encoding/o200k_base";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { evalClient, finished } from "./evals-client.ts";
import { parseEvents, useStack } from "./stack.ts";

/**
 * A provider that ignores `max_tokens` answers past the output cap a budget
 * reserved. The answer is cut at the cap (streamed or not: the provider is
 * not read further), ends as truncated in the API's own terms, and is charged
 * at most what was reserved, so the key's token budget is never exceeded;
 * the overrun is counted and logged. Responses, chat completions and eval
 * runs alike.
 */
const MODEL = "gpt-4o-mini";
const CAP = 64;
const stack = useStack({
  LLM_MODELS: `${MODEL}=0.15/0.075/0.6`,
  LLM_DEFAULT_MODEL: MODEL,
  LLM_DEFAULT_MAX_OUTPUT_TOKENS: String(CAP),
  LLM_TIMEOUT_MS: "30000",
});
/** The prompt fits the window with the cap reserved; the echo the provider sends back does not. */
const LIMIT = 2_000;
const LIMITS: Limits = { tokens: { day: LIMIT } };
const tokensOf = (text: string) => o200k(text, { disallowedSpecial: new Set() });

beforeAll(() => {
  stack.llm.ignoreMaxTokens = true;
  stack.llm.countTokens = tokensOf;
  stack.llm.chunkDelayMs = 0;
});
afterAll(() => {
  stack.llm.ignoreMaxTokens = false;
  stack.llm.countTokens = undefined;
});

/** About 1,200 tokens, unique per call: the provider echoes it all back, far past the cap. */
const longInput = () => `${randomBytes(4).toString("hex")} ${"the quick brown fox jumps ".repeat(240)}`;

const tokensUsed = async (keyId: string) =>
  (await new CountingWindows(stack.redis).peek(keyId, undefined, LIMITS))[0]!.used;

/** One sample of the service's /metrics (0 when absent). */
async function metric(name: string): Promise<number> {
  const text = await (await fetch(`${stack.serviceUrl}/metrics`)).text();
  const line = text.split("\n").find((l) => l.startsWith(`${name} `));
  return line ? Number(line.split(" ")[1]) : 0;
}

/** What each route and mode gives the client: the answer's text, whether it ends as truncated, and its output tokens. */
const ROUTES = {
  "responses, JSON": {
    path: "/api/v1/llm/responses",
    body: (input: string) => ({ model: MODEL, input }),
    read: async (res: Response) => {
      const body = await res.json();
      return {
        text: body.output[0].content[0].text as string,
        truncated: body.status === "incomplete" && body.incomplete_details?.reason === "max_output_tokens",
        outputTokens: body.usage.output_tokens as number,
      };
    },
  },
  "responses, streamed": {
    path: "/api/v1/llm/responses",
    body: (input: string) => ({ model: MODEL, input, stream: true }),
    read: async (res: Response) => {
      const events = parseEvents(await res.text());
      const last = events.at(-1)!;
      const response = last.data.response as {
        status: string;
        incomplete_details: { reason: string } | null;
        usage: { output_tokens: number };
      };
      const deltas = events.filter((e) => e.type === "response.output_text.delta");
      return {
        text: deltas.map((e) => e.data.delta).join(""),
        truncated:
          last.type === "response.incomplete" &&
          response.status === "incomplete" &&
          response.incomplete_details?.reason === "max_output_tokens",
        outputTokens: response.usage.output_tokens,
      };
    },
  },
  "chat completions, JSON": {
    path: "/api/v1/llm/chat/completions",
    body: (input: string) => ({ model: MODEL, messages: [{ role: "user", content: input }] }),
    read: async (res: Response) => {
      const body = await res.json();
      return {
        text: body.choices[0].message.content as string,
        truncated: body.choices[0].finish_reason === "length",
        outputTokens: body.usage.completion_tokens as number,
      };
    },
  },
  "chat completions, streamed": {
    path: "/api/v1/llm/chat/completions",
    body: (input: string) => ({
      model: MODEL,
      messages: [{ role: "user", content: input }],
      stream: true,
      stream_options: { include_usage: true },
    }),
    read: async (res: Response) => {
      const chunks = (await res.text())
        .split("\n\n")
        .filter((block) => block.startsWith("data: {"))
        .map((block) => JSON.parse(block.slice("data: ".length)));
      const choices = chunks.flatMap((c) => c.choices);
      return {
        text: choices.map((c) => c.delta?.content ?? "").join(""),
        truncated: choices.some((c) => c.finish_reason === "length"),
        outputTokens: chunks.at(-1).usage.completion_tokens as number,
      };
    },
  },
} as const;

describe.each(Object.keys(ROUTES) as (keyof typeof ROUTES)[])("%s", (name) => {
  const route = ROUTES[name];

  it("cuts an answer past the cap there, charges at most the reservation, and counts the overrun", async () => {
    const key = await stack.createKey({ limits: LIMITS });
    const input = longInput();
    const [overruns, overrunTokens] = await Promise.all([
      metric("service_llm_output_overruns_total"),
      metric("service_llm_output_overrun_tokens_total"),
    ]);
    const res = await stack.call(key.secret, route.path, { json: route.body(input) });
    expect(res.status).toBe(200);
    const seen = await route.read(res);

    const upstream = stack.llm.requests.find((r) => JSON.stringify(r.body).includes(input.slice(0, 8)))!;
    expect(upstream.body.max_tokens).toBe(CAP); // sent, and ignored
    // The client sees a truncated answer, no longer than the cap.
    expect(seen.truncated).toBe(true);
    expect(seen.text.length).toBeGreaterThan(0);
    expect(tokensOf(seen.text)).toBeLessThanOrEqual(CAP);
    expect(input).toContain(seen.text.replace(/^Echo: /, "").trim());
    expect(seen.outputTokens).toBe(CAP);
    // Charged the prompt and the cap at most: the window stays within its limit.
    const used = await tokensUsed(key.id);
    expect(used).toBeLessThanOrEqual(LIMIT);
    expect(used).toBeGreaterThan(tokensOf(input));
    // A streamed answer stops the provider at the cut.
    if (upstream.body.stream) expect(upstream.aborted).toBe(true);
    expect(await metric("service_llm_output_overruns_total")).toBe(overruns + 1);
    expect(await metric("service_llm_output_overrun_tokens_total")).toBeGreaterThan(overrunTokens);
    expect(
      stack.serviceLogs.some(
        (l) =>
          l.msg === "the model provider went past the output cap: the answer was cut at it" &&
          l.keyId === key.id &&
          l.cap === CAP,
      ),
    ).toBe(true);
  });
});

describe("eval runs", () => {
  it("are cut at the cap and charged at most the reservation, within the key's budget", async () => {
    const key = await stack.createKey({ limits: LIMITS });
    const evals = evalClient(stack, key.secret);
    const input = longInput();
    const schedule = await evals.created({ name: "overrun", inputs: [input], every_seconds: 3600 });
    const [run] = await evals.untilRuns(schedule.id, (r) => expect(finished(r)).toHaveLength(1));
    await evals.delete(schedule.id);
    expect(run!.status).toBe("completed");
    const [result] = run!.results;
    expect(tokensOf(result!.output)).toBeLessThanOrEqual(CAP);
    expect(result!.usage.output_tokens).toBe(CAP);
    expect(await tokensUsed(key.id)).toBeLessThanOrEqual(LIMIT);
  });
});
