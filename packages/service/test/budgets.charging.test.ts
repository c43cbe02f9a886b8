import { randomBytes } from "node:crypto";
import type { Limits } from "@gw/core/limits";
import { CountingWindows } from "@gw/core/windows";
import { describe, expect, it, vi } from "vitest";
import type { ChatMessage } from "../src/llm/chat.ts";
import { countPromptTokens, countTokens } from "../src/llm/tokens.ts";
import { useStack } from "./stack.ts";

/**
 * Charging what was used: once the provider has the request, a call is
 * charged (budgets) and recorded (usage) at least the prompt as counted for
 * admission plus what was produced, however it ends: the client going away
 * while the provider works, or a stream cut midway. Responses and chat
 * completions alike.
 */
const MODEL = "gpt-4o-mini";
const stack = useStack({ LLM_MODELS: `${MODEL}=0.15/0.075/0.6`, LLM_TIMEOUT_MS: "30000" });
const LIMITS: Limits = { tokens: { day: 1_000_000 }, spend: { day: 10 } };

/** A prompt whose counted tokens are far from the characters/4 estimate (CJK, digits), unique per test. */
const promptText = () =>
  `${randomBytes(4).toString("hex")} ${"漢字かな交じり文".repeat(40)} ${"1234567890".repeat(20)}`;

const tokensUsed = async (keyId: string) =>
  (await new CountingWindows(stack.redis).peek(keyId, undefined, LIMITS)).find((s) => s.unit === "tokens")!
    .used;
const usageTotals = async (secret: string) => {
  const day = new Date().toISOString().slice(0, 10);
  return (await (await stack.call(secret, `/api/v1/usage?start=${day}`)).json()).totals;
};

const ROUTES = {
  responses: {
    path: "/api/v1/llm/responses",
    body: (text: string, extra: Record<string, unknown> = {}) => ({ model: MODEL, input: text, ...extra }),
  },
  "chat completions": {
    path: "/api/v1/llm/chat/completions",
    body: (text: string, extra: Record<string, unknown> = {}) => ({
      model: MODEL,
      messages: [{ role: "user", content: text }],
      ...extra,
    }),
  },
} as const;

/** What admission counted for a one-message prompt (nothing else in the request). */
const counted = (text: string) =>
  countPromptTokens({ model: MODEL, messages: [{ role: "user", content: text }] satisfies ChatMessage[] });

describe.each(Object.keys(ROUTES) as (keyof typeof ROUTES)[])("%s", (name) => {
  const route = ROUTES[name];
  const send = (secret: string, body: unknown, signal?: AbortSignal) =>
    fetch(`${stack.gatewayUrl}${route.path}`, {
      method: "POST",
      headers: { authorization: `Bearer ${secret}`, "content-type": "application/json" },
      body: JSON.stringify(body),
      signal,
    });

  it("a client that goes away while the provider works is still charged the counted prompt, and usage records it", async () => {
    const key = await stack.createKey({ limits: LIMITS });
    const text = promptText();
    stack.llm.mode = "hold";
    const client = new AbortController();
    try {
      const pending = send(key.secret, route.body(text), client.signal).catch((err: Error) => err);
      // The provider has the request: then the client goes away. On a busy machine the request can take more
      // than waitFor's default second to get there (a fresh clone's CI run once did).
      await vi.waitFor(
        () => expect(stack.llm.requests.some((r) => r.body.messages.at(-1)?.content === text)).toBe(true),
        { timeout: 10_000 },
      );
      client.abort();
      expect(await pending).toBeInstanceOf(Error);
      await vi.waitFor(
        () =>
          expect(stack.llm.requests.find((r) => r.body.messages.at(-1)?.content === text)!.aborted).toBe(
            true,
          ),
        { timeout: 5_000 },
      );
    } finally {
      stack.llm.release();
    }
    const prompt = await counted(text);
    expect(prompt).toBeGreaterThan(text.length / 4); // the estimate from characters would undercharge
    await vi.waitFor(async () => expect(await tokensUsed(key.id)).toBe(prompt), { timeout: 5_000 });
    const usage = await usageTotals(key.secret);
    expect(usage).toMatchObject({ requests: 1, input_tokens: prompt, output_tokens: 0 });
    expect(usage.cost_usd).toBeGreaterThan(0);
  });

  it("a stream cut midway is charged the counted prompt plus what was produced, and usage records it", async () => {
    const key = await stack.createKey({ limits: LIMITS });
    const text = promptText();
    stack.llm.mode = "error-midstream";
    let body: string;
    try {
      const res = await send(key.secret, route.body(text, { stream: true }));
      expect(res.status).toBe(200);
      body = await res.text();
    } finally {
      stack.llm.mode = "ok";
    }
    // The one piece the provider produced before its error: "Echo: ".
    expect(body).toContain("Echo:");
    const prompt = await counted(text);
    const produced = await countTokens(MODEL, "Echo: ");
    await vi.waitFor(async () => expect(await tokensUsed(key.id)).toBe(prompt + produced), {
      timeout: 5_000,
    });
    expect(await usageTotals(key.secret)).toMatchObject({
      requests: 1,
      input_tokens: prompt,
      output_tokens: produced,
    });
  });

  it("a client that goes away mid-stream is charged the counted prompt plus what was produced", async () => {
    const key = await stack.createKey({ limits: LIMITS });
    const text = promptText();
    stack.llm.mode = "hold-midstream";
    const client = new AbortController();
    try {
      const res = await send(key.secret, route.body(text, { stream: true }), client.signal);
      const reader = res.body!.getReader();
      const decoder = new TextDecoder();
      let seen = "";
      while (!seen.includes("Echo:")) seen += decoder.decode((await reader.read()).value);
      client.abort();
      await vi.waitFor(
        () =>
          expect(stack.llm.requests.find((r) => r.body.messages.at(-1)?.content === text)!.aborted).toBe(
            true,
          ),
        { timeout: 5_000 },
      );
    } finally {
      stack.llm.release();
    }
    const prompt = await counted(text);
    const produced = await countTokens(MODEL, "Echo: ");
    await vi.waitFor(async () => expect(await tokensUsed(key.id)).toBe(prompt + produced), {
      timeout: 5_000,
    });
    expect(await usageTotals(key.secret)).toMatchObject({
      requests: 1,
      input_tokens: prompt,
      output_tokens: produced,
    });
  });
});
