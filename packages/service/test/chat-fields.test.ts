import type { Limits } from "@gw/core/limits";
import { CountingWindows } from "@gw/core/windows";
import { describe, expect, it, vi } from "vitest";
import { useStack } from "./stack.ts";

/**
 * The chat-completions fields an OpenAI-compatible provider takes as they
 * are: `n` (several answers, reserved and charged for all of them),
 * `presence_penalty`, `frequency_penalty`, `logit_bias`, `logprobs` and
 * `top_logprobs`; and `n` on Responses, which have none, refused by name.
 */
const MODEL = "gpt-4o-mini";
const stack = useStack({ LLM_MODELS: `${MODEL}=0.15/0.075/0.6` });
const CHAT = "/api/v1/llm/chat/completions";
const LIMITS: Limits = { tokens: { day: 1_000_000 }, spend: { day: 10 } };
const upstream = () => stack.llm.requests.at(-1)!.body;

const tokensUsed = async (keyId: string) =>
  (await new CountingWindows(stack.redis).peek(keyId, undefined, LIMITS)).find((s) => s.unit === "tokens")!
    .used;
const usageTotals = async (secret: string) => {
  const day = new Date().toISOString().slice(0, 10);
  return (await (await stack.call(secret, `/api/v1/usage?start=${day}`)).json()).totals;
};

/** The `data:` payloads of a chat-completions stream, `[DONE]` left out. */
const chunksOf = (text: string) =>
  text
    .split("\n\n")
    .filter(Boolean)
    .map((block) => /^data: (.*)$/m.exec(block)![1]!)
    .filter((data) => data !== "[DONE]")
    .map((data) => JSON.parse(data));

describe("chat completions' sampling fields", () => {
  it("sends presence_penalty, frequency_penalty, logit_bias, logprobs and top_logprobs to the provider, and answers the logprobs", async () => {
    const key = await stack.createKey();
    const res = await stack.call(key.secret, CHAT, {
      json: {
        model: MODEL,
        messages: [{ role: "user", content: "hello there" }],
        presence_penalty: 0.5,
        frequency_penalty: -0.25,
        logit_bias: { "50256": -100, "1000": 5 },
        logprobs: true,
        top_logprobs: 2,
      },
    });
    expect(res.status).toBe(200);
    const body = await res.json();
    expect(upstream()).toMatchObject({
      presence_penalty: 0.5,
      frequency_penalty: -0.25,
      logit_bias: { "50256": -100, "1000": 5 },
      logprobs: true,
      top_logprobs: 2,
    });
    const { content } = body.choices[0].logprobs;
    expect(content.map((t: { token: string }) => t.token).join("")).toBe("Echo: hello there");
    expect(content[0]).toEqual({
      token: "Echo: ",
      logprob: -0.5,
      bytes: [...Buffer.from("Echo: ")],
      top_logprobs: [
        { token: "Echo:?", logprob: -2, bytes: [...Buffer.from("Echo:?")] },
        { token: "Echo:?1", logprob: -2, bytes: [...Buffer.from("Echo:?1")] },
      ],
    });
  });

  it("streams the logprobs with the last chunk, so the SDKs' joined chunks have them all", async () => {
    const key = await stack.createKey();
    const res = await stack.call(key.secret, CHAT, {
      json: { model: MODEL, messages: [{ role: "user", content: "a b c" }], stream: true, logprobs: true },
    });
    expect(res.status).toBe(200);
    const tokens = chunksOf(await res.text()).flatMap((c) =>
      c.choices.flatMap((choice: { logprobs: { content: { token: string }[] } | null }) =>
        (choice.logprobs?.content ?? []).map((t) => t.token),
      ),
    );
    expect(tokens.join("")).toBe("Echo: a b c");
  });

  it.each([
    [{ presence_penalty: 2.5 }, "presence_penalty", "less_than_equal"],
    [{ frequency_penalty: -3 }, "frequency_penalty", "greater_than_equal"],
    [{ logit_bias: { word: 1 } }, "logit_bias.word", undefined],
    [{ logit_bias: { "12": 101 } }, "logit_bias.12", "less_than_equal"],
    [{ top_logprobs: 3 }, "top_logprobs", "needs logprobs: true"],
    [{ n: 0 }, "n", "greater_than_equal"],
    [{ n: 129 }, "n", "less_than_equal"],
  ])("validates %j at the edge", async (fields, param, code) => {
    const key = await stack.createKey();
    const before = stack.llm.requests.length;
    const res = await stack.call(key.secret, CHAT, {
      json: { model: MODEL, messages: [{ role: "user", content: "x" }], ...fields },
    });
    expect(res.status).toBe(422);
    const body = await res.json();
    expect(body.error.param).toBe(param);
    if (code?.includes(" ")) expect(body.error.message).toContain(code);
    else if (code) expect(body.error.code).toBe(code);
    expect(stack.llm.requests.length).toBe(before);
  });
});

describe("n answers", () => {
  it("answers n choices, each with its index, and usage counts the tokens of all of them", async () => {
    const key = await stack.createKey({ limits: LIMITS });
    const res = await stack.call(key.secret, CHAT, {
      json: { model: MODEL, messages: [{ role: "user", content: "one two three" }], n: 3 },
    });
    expect(res.status).toBe(200);
    const body = await res.json();
    expect(upstream().n).toBe(3);
    expect(
      body.choices.map((c: { index: number; message: { content: string }; finish_reason: string }) => [
        c.index,
        c.message.content,
        c.finish_reason,
      ]),
    ).toEqual([
      [0, "Echo: one two three", "stop"],
      [1, "Echo: one two three #2", "stop"],
      [2, "Echo: one two three #3", "stop"],
    ]);
    // 4 + 5 + 5 words: the provider counts every choice's tokens.
    expect(body.usage.completion_tokens).toBe(14);
    // Charged n-fold: the budget and usage have what the provider reported for all three.
    expect(await tokensUsed(key.id)).toBe(body.usage.prompt_tokens + 14);
    expect(await usageTotals(key.secret)).toMatchObject({
      input_tokens: body.usage.prompt_tokens,
      output_tokens: 14,
    });
  });

  it("reserves the output cap once for each answer while the provider works", async () => {
    const text = `reserve ${Date.now()}`;
    /** What a key has reserved while the provider holds its call for `n` answers. */
    const reservedFor = async (n: number) => {
      const key = await stack.createKey({ limits: LIMITS });
      const before = stack.llm.requests.length;
      stack.llm.mode = "hold";
      try {
        const pending = stack.call(key.secret, CHAT, {
          json: { model: MODEL, messages: [{ role: "user", content: text }], n, max_completion_tokens: 100 },
        });
        await vi.waitFor(() => expect(stack.llm.requests.length).toBe(before + 1));
        const reserved = await tokensUsed(key.id);
        stack.llm.release();
        expect((await pending).status).toBe(200);
        return reserved;
      } finally {
        stack.llm.release();
      }
    };
    // The prompt is counted alike (n is no text the model reads); the output cap is reserved n times.
    const one = await reservedFor(1);
    expect(one).toBeGreaterThan(100);
    expect(await reservedFor(4)).toBe(one + 3 * 100);
  });

  it("holds each answer to the output cap on its own", async () => {
    const key = await stack.createKey();
    const res = await stack.call(key.secret, CHAT, {
      json: { model: MODEL, messages: [{ role: "user", content: "one two three" }], n: 2, max_tokens: 4 },
    });
    const body = await res.json();
    expect(upstream().max_tokens).toBe(4);
    expect(body.choices.map((c: { message: { content: string } }) => c.message.content)).toEqual([
      "Echo: one two three",
      "Echo: one two three",
    ]);
    expect(body.choices.map((c: { finish_reason: string }) => c.finish_reason)).toEqual(["stop", "length"]);
    expect(body.usage.completion_tokens).toBe(8);
  });

  it("streams n choices, every chunk carrying its choice's index, then the usage of them all", async () => {
    const key = await stack.createKey();
    const res = await stack.call(key.secret, CHAT, {
      json: {
        model: MODEL,
        messages: [{ role: "user", content: "hi" }],
        n: 2,
        stream: true,
        stream_options: { include_usage: true },
      },
    });
    expect(res.status).toBe(200);
    const chunks = chunksOf(await res.text());
    const text = (index: number) =>
      chunks
        .flatMap((c) => c.choices)
        .filter((c: { index: number }) => c.index === index)
        .map((c: { delta: { content?: string } }) => c.delta.content ?? "")
        .join("");
    expect([text(0), text(1)]).toEqual(["Echo: hi", "Echo: hi #2"]);
    const finishes = chunks
      .flatMap((c) => c.choices)
      .filter((c: { finish_reason: string | null }) => c.finish_reason)
      .map((c: { index: number; finish_reason: string }) => [c.index, c.finish_reason]);
    expect(finishes).toEqual([
      [0, "stop"],
      [1, "stop"],
    ]);
    expect(chunks.at(-1).usage.completion_tokens).toBe(2 + 3);
  });
});

describe("n on Responses", () => {
  it("is refused by name: a response is one answer", async () => {
    const key = await stack.createKey();
    const before = stack.llm.requests.length;
    const res = await stack.call(key.secret, "/api/v1/llm/responses", {
      json: { model: MODEL, input: "hi", n: 2 },
    });
    expect(res.status).toBe(422);
    expect((await res.json()).error).toEqual({
      message:
        "Invalid 'n': n (a response is one answer; chat completions take n) is not supported by this service",
      type: "invalid_request_error",
      param: "n",
      code: "value_error",
    });
    expect(stack.llm.requests.length).toBe(before);
  });
});
