import { systemClock } from "@gw/core/clock";
import { AppError } from "@gw/core/errors";
import { endSpan, flushTracing, startServerSpan, startTracing, stopTracing } from "@gw/core/tracing";
import { type FakeAnthropic, startFakeAnthropic } from "@gw/test-kit/anthropic-upstream";
import { PROVIDER_SECRETS } from "@gw/test-kit/llm-upstream";
import { InMemorySpanExporter } from "@opentelemetry/sdk-trace";
import { createParser } from "eventsource-parser";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { z } from "zod";
import { ids } from "../ids.ts";
import { type AnthropicOptions, AnthropicProvider } from "./anthropic.ts";
import { DEFAULT_MAX_TOKENS, stopReasonOf } from "./anthropic-wire.ts";
import type { ChatRequest, Completion, ToolCallDelta } from "./chat.ts";
import { ProviderError, ProviderFailed, ProviderRateLimited, ProviderTimeout } from "./errors.ts";
import { costNanoUsd } from "./prices.ts";

/**
 * The Anthropic Messages provider on its own, against the fake Messages API
 * (which refuses, as the real one does, the requests a mapping can get
 * wrong): what reaches the API, what comes back in the service's terms, and
 * the promises every provider keeps (deadlines, limits, abort, the key).
 */

const KEY = "sk-ant-api03-Zq9fakeKEYforTESTSonly0123456789";
let fake: FakeAnthropic;

beforeAll(async () => {
  fake = await startFakeAnthropic();
});
afterAll(() => fake.close());
afterEach(() => {
  fake.mode = "ok";
  fake.failStatus = 500;
  fake.ignoreMaxTokens = false;
  fake.cacheReadTokens = 0;
  fake.cacheWriteTokens = 0;
  fake.toolPreamble = undefined;
  fake.chunkDelayMs = 5;
});

function provider(options: Partial<AnthropicOptions> = {}) {
  return new AnthropicProvider({
    baseUrl: fake.baseUrl,
    apiKey: KEY,
    model: "claude-sonnet-4-5",
    timeoutMs: 2_000,
    maxResponseBytes: 65_536,
    maxEventChars: 16_384,
    ids: ids(systemClock),
    ...options,
  });
}

const open = () => new AbortController().signal;
const lastRequest = () => fake.requests.at(-1)!;
const ask = (content: string, more: Partial<ChatRequest> = {}): ChatRequest => ({
  model: "smart",
  messages: [{ role: "user", content }],
  ...more,
});

/** Every piece a stream yielded, and the completion it returned. */
async function drain(stream: AsyncGenerator<string | ToolCallDelta, Completion>) {
  const pieces: (string | ToolCallDelta)[] = [];
  for (let next = await stream.next(); ; next = await stream.next()) {
    if (next.done) return { pieces, completion: next.value };
    pieces.push(next.value);
  }
}

/** The completion, asked for as JSON or as a stream. */
async function answer(stream: boolean, request: ChatRequest, options: Partial<AnthropicOptions> = {}) {
  const p = provider(options);
  return stream ? (await drain(p.stream(request, open()))).completion : p.complete(request, open());
}

/** The error a call fails with, as JSON or as a stream. */
async function failure(stream: boolean, request: ChatRequest, options: Partial<AnthropicOptions> = {}) {
  const err = await answer(stream, request, options).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ProviderError);
  return err as ProviderError;
}

/** Nothing of the key, nor of what a leaky provider said, in anything an error carries. */
function expectNoSecrets(err: ProviderError) {
  const everything = [err.message, err.providerDetail, String(err), err.stack, JSON.stringify(err)].join(
    "\n",
  );
  expect(everything).not.toContain(KEY);
  expect(everything).not.toContain(PROVIDER_SECRETS.password);
  expect(everything).not.toContain(PROVIDER_SECRETS.apiKey);
}

const WEATHER = {
  name: "weather",
  description: "The weather in a city",
  parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
};

describe("the request Anthropic gets", () => {
  it("carries the key as x-api-key with anthropic-version (no bearer), the deployment's model, system messages as the top-level system, max_tokens, and only fields Anthropic has", async () => {
    const request: ChatRequest = {
      model: "smart",
      messages: [
        { role: "system", content: "Be brief." },
        { role: "developer", content: "Answer in English." },
        { role: "user", content: "hello there" },
      ],
      temperature: 0.2,
      topP: 0.9,
      user: "alice",
      stop: ["STOP"],
      // No equivalent: left out.
      seed: 7,
      verbosity: "low",
      reasoningEffort: "high",
      promptCacheKey: "cache-key",
      serviceTier: "flex",
      logprobs: true,
      topLogprobs: 2,
      responseFormat: { type: "json_object" },
    };
    const completion = await provider().complete(request, open());
    const sent = lastRequest();
    expect(sent.path).toBe("/v1/messages");
    expect(sent.headers["x-api-key"]).toBe(KEY);
    expect(sent.headers["anthropic-version"]).toBe("2023-06-01");
    expect(sent.headers.authorization).toBeUndefined();
    expect(sent.body).toEqual({
      model: "claude-sonnet-4-5",
      max_tokens: DEFAULT_MAX_TOKENS,
      system: [
        { type: "text", text: "Be brief." },
        { type: "text", text: "Answer in English." },
      ],
      messages: [{ role: "user", content: [{ type: "text", text: "hello there" }] }],
      temperature: 0.2,
      top_p: 0.9,
      stop_sequences: ["STOP"],
      metadata: { user_id: "alice" },
    });
    expect(completion).toEqual({
      text: "Echo: hello there",
      toolCalls: [],
      finishReason: "stop",
      model: "claude-sonnet-4-5-20260101",
      // The fake's counts: 5 words of system prompt, 2 of message and 3 for it; 3 words of answer.
      usage: { input_tokens: 10, output_tokens: 3, total_tokens: 13 },
      usageDetails: { cachedTokens: 0, reasoningTokens: 0 },
    });
  });

  it("sends the call's model when the deployment names none, its cap as max_tokens, and the anthropic-version it is given", async () => {
    await provider({ model: undefined, anthropicVersion: "2024-10-22" }).complete(
      ask("hi", { maxOutputTokens: 77 }),
      open(),
    );
    expect(lastRequest().headers["anthropic-version"]).toBe("2024-10-22");
    expect(lastRequest().body).toMatchObject({ model: "smart", max_tokens: 77 });
  });

  it("sends a json_schema response format as output_config.format", async () => {
    const schema = { type: "object", properties: { answer: { type: "string" } } };
    await provider().complete(
      ask("hi", { responseFormat: { type: "json_schema", json_schema: { name: "a", schema } } }),
      open(),
    );
    expect(lastRequest().body.output_config).toEqual({ format: { type: "json_schema", schema } });
  });

  it.each<[string, Partial<ChatRequest>, unknown]>([
    ["no choice", {}, undefined],
    ["auto", { toolChoice: "auto" }, { type: "auto" }],
    ["none", { toolChoice: "none" }, { type: "none" }],
    ["required", { toolChoice: "required" }, { type: "any" }],
    ["a named tool", { toolChoice: { name: "noop" } }, { type: "tool", name: "noop" }],
    ["no parallel calls", { parallelToolCalls: false }, { type: "auto", disable_parallel_tool_use: true }],
    [
      "required, no parallel calls",
      { toolChoice: "required", parallelToolCalls: false },
      { type: "any", disable_parallel_tool_use: true },
    ],
  ])("maps function tools to tools with input_schema, and tool_choice (%s)", async (_, more, choice) => {
    await provider().complete(
      ask("find it", { tools: [{ ...WEATHER, strict: true }, { name: "noop" }], ...more }),
      open(),
    );
    const body = lastRequest().body;
    expect(body.tools).toEqual([
      {
        name: "weather",
        description: "The weather in a city",
        input_schema: WEATHER.parameters,
        strict: true,
      },
      { name: "noop", input_schema: { type: "object", properties: {} } },
    ]);
    expect(body.tool_choice).toEqual(choice);
  });

  it("sends no tools and no tool_choice when the call has no tools", async () => {
    await provider().complete(ask("hi", { tools: [], toolChoice: "auto", parallelToolCalls: false }), open());
    expect(lastRequest().body).not.toHaveProperty("tools");
    expect(lastRequest().body).not.toHaveProperty("tool_choice");
  });

  it("round-trips a conversation with tool calls and results: tool_use blocks, the results grouped in one user turn, roles alternating", async () => {
    const request: ChatRequest = {
      model: "smart",
      tools: [WEATHER, { name: "clock" }],
      messages: [
        { role: "system", content: "Use the tools." },
        { role: "user", content: "Weather in Paris and Rome?" },
        {
          role: "assistant",
          content: "Checking both.",
          toolCalls: [
            { id: "toolu_a", name: "weather", arguments: '{"city":"Paris"}' },
            { id: "toolu_b", name: "weather", arguments: '{"city":"Rome"}' },
          ],
        },
        { role: "tool", toolCallId: "toolu_a", content: "18C sunny" },
        { role: "tool", toolCallId: "toolu_b", content: "21C cloudy" },
        { role: "user", content: "And the time?" },
        { role: "assistant", content: "", toolCalls: [{ id: "toolu_c", name: "clock", arguments: "" }] },
        { role: "tool", toolCallId: "toolu_c", content: "noon" },
      ],
    };
    for (const stream of [false, true]) {
      const completion = await answer(stream, request);
      expect(lastRequest().body.messages).toEqual([
        { role: "user", content: [{ type: "text", text: "Weather in Paris and Rome?" }] },
        {
          role: "assistant",
          content: [
            { type: "text", text: "Checking both." },
            { type: "tool_use", id: "toolu_a", name: "weather", input: { city: "Paris" } },
            { type: "tool_use", id: "toolu_b", name: "weather", input: { city: "Rome" } },
          ],
        },
        {
          role: "user",
          content: [
            { type: "tool_result", tool_use_id: "toolu_a", content: "18C sunny" },
            { type: "tool_result", tool_use_id: "toolu_b", content: "21C cloudy" },
            { type: "text", text: "And the time?" },
          ],
        },
        // A call without arguments is one with an empty input.
        { role: "assistant", content: [{ type: "tool_use", id: "toolu_c", name: "clock", input: {} }] },
        { role: "user", content: [{ type: "tool_result", tool_use_id: "toolu_c", content: "noon" }] },
      ]);
      expect(lastRequest().body.system).toEqual([{ type: "text", text: "Use the tools." }]);
      // The model read the last result and answered.
      expect(completion).toMatchObject({ text: "Echo: noon", toolCalls: [], finishReason: "stop" });
    }
  });

  it("sends text given in several parts as one text block each, and a redacted message's whole text", async () => {
    const request: ChatRequest = {
      model: "smart",
      messages: [
        { role: "system", content: "Rule one.Rule two.", parts: ["Rule one.", "Rule two."] },
        { role: "user", content: "HelloWorld", parts: ["Hello", "World"] },
        // Its content changed after the parts were given (a redaction): the parts are not sent.
        { role: "user", content: "[REDACTED:email] there", parts: ["a@b.example", " there"] },
      ],
    };
    await answer(false, request);
    expect(lastRequest().body.system).toEqual([
      { type: "text", text: "Rule one." },
      { type: "text", text: "Rule two." },
    ]);
    expect(lastRequest().body.messages).toEqual([
      {
        role: "user",
        content: [
          { type: "text", text: "Hello" },
          { type: "text", text: "World" },
          { type: "text", text: "[REDACTED:email] there" },
        ],
      },
    ]);
  });

  it("refuses, before calling, a tool call whose arguments are not a JSON object (Anthropic takes only objects)", async () => {
    const before = fake.requests.length;
    const request: ChatRequest = {
      model: "smart",
      messages: [
        { role: "user", content: "hi" },
        {
          role: "assistant",
          content: "",
          toolCalls: [{ id: "toolu_x", name: "weather", arguments: "[1, 2" }],
        },
        { role: "tool", toolCallId: "toolu_x", content: "?" },
      ],
    };
    const err = await provider()
      .complete(request, open())
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(AppError);
    expect(err).toMatchObject({ code: "bad_request" });
    expect(fake.requests.length).toBe(before);
  });
});

describe("the answer in the service's terms", () => {
  it("streams the same answer as JSON: text pieces as they come, the model from message_start on", async () => {
    const request = ask("one two three");
    const whole = await provider().complete(request, open());
    const seen: { model?: string } = {};
    const stream = provider().stream(request, open(), seen);
    const first = await stream.next();
    expect(first.value).toBe("Echo: ");
    expect(seen.model).toBe("claude-sonnet-4-5-20260101");
    const { pieces, completion } = await drain(stream);
    expect(["Echo: ", ...pieces].join("")).toBe("Echo: one two three");
    expect(completion).toEqual(whole);
    expect(lastRequest().body.stream).toBe(true);
  });

  it.each([false, true])(
    "tool_use blocks are tool calls with their input as JSON text, after the text before them (stream: %s)",
    async (stream) => {
      fake.toolPreamble = "Let me look.";
      const completion = await answer(stream, ask("find it", { tools: [WEATHER, { name: "noop" }] }));
      const n = fake.requests.length;
      expect(completion).toMatchObject({
        text: "Let me look.",
        finishReason: "tool_calls",
        toolCalls: [
          { id: `toolu_${n}_0`, name: "weather", arguments: '{"text":"find it"}' },
          { id: `toolu_${n}_1`, name: "noop", arguments: '{"text":"find it"}' },
        ],
      });
    },
  );

  it("streams each tool call announced with its id and name, then its input in pieces that add up to the call's arguments", async () => {
    fake.toolPreamble = "Let me look.";
    const { pieces, completion } = await drain(
      provider().stream(ask("find it", { tools: [WEATHER, { name: "noop" }] }), open()),
    );
    expect(pieces.filter((p) => typeof p === "string").join("")).toBe("Let me look.");
    const deltas = pieces.filter((p): p is ToolCallDelta => typeof p !== "string");
    expect(deltas[0]).toEqual({ index: 0, id: completion.toolCalls[0]!.id, name: "weather", arguments: "" });
    for (const [index, call] of completion.toolCalls.entries()) {
      const own = deltas.filter((d) => d.index === index);
      expect(own.every((d) => d.id === call.id && d.name === call.name)).toBe(true);
      expect(own.map((d) => d.arguments).join("")).toBe(call.arguments);
    }
  });

  it.each([false, true])(
    "stop reasons: end_turn, max_tokens, stop_sequence, tool_use (stream: %s)",
    async (stream) => {
      expect(await answer(stream, ask("one two three"))).toMatchObject({
        text: "Echo: one two three",
        finishReason: "stop",
      });
      expect(await answer(stream, ask("one two three", { maxOutputTokens: 2 }))).toMatchObject({
        text: "Echo: one",
        finishReason: "length",
      });
      expect(lastRequest().body.max_tokens).toBe(2);
      expect(await answer(stream, ask("one two three", { stop: ["two"] }))).toMatchObject({
        text: "Echo: one ",
        finishReason: "stop",
      });
      expect(await answer(stream, ask("one", { tools: [WEATHER] }))).toMatchObject({
        finishReason: "tool_calls",
      });
      expect(await answer(stream, ask("one", { tools: [WEATHER], toolChoice: "none" }))).toMatchObject({
        text: "Echo: one",
        toolCalls: [],
        finishReason: "stop",
      });
    },
  );

  it("maps the other stop reasons Anthropic documents", () => {
    expect(stopReasonOf("refusal")).toBe("content_filter");
    expect(stopReasonOf("model_context_window_exceeded")).toBe("length");
    expect(stopReasonOf("pause_turn")).toBe("unknown");
    expect(stopReasonOf(null)).toBe("unknown");
  });

  it.each([false, true])(
    "usage: cache reads are cached input, cache writes input, so a model's prices apply as to OpenAI's counts (stream: %s)",
    async (stream) => {
      fake.cacheReadTokens = 1_000;
      fake.cacheWriteTokens = 200;
      const completion = await answer(stream, ask("one two three"));
      // The fake's own input_tokens (3 words, 3 for the message) leave the cache's out, as Anthropic's do.
      expect(completion.usage).toEqual({ input_tokens: 1_206, output_tokens: 4, total_tokens: 1_210 });
      expect(completion.usageDetails).toEqual({
        cachedTokens: 1_000,
        reasoningTokens: 0,
        cacheWriteTokens: 200,
      });
      const price = { input: 3, cachedInput: 0.3, output: 15 };
      const nanoUsdPerToken = (usdPerMillion: number) => usdPerMillion * 1_000;
      expect(
        costNanoUsd(price, { ...completion.usage, cached_tokens: completion.usageDetails.cachedTokens }),
      ).toBe((6 + 200) * nanoUsdPerToken(3) + 1_000 * nanoUsdPerToken(0.3) + 4 * nanoUsdPerToken(15));
    },
  );
});

describe("the output cap, for a provider that ignores max_tokens", () => {
  const long = Array.from({ length: 60 }, (_, i) => `word${i}`).join(" ");

  it("cuts a JSON answer at the cap, counts the cap, and says by how much it went past", async () => {
    fake.ignoreMaxTokens = true;
    const completion = await provider().complete(ask(long, { maxOutputTokens: 5 }), open());
    expect(lastRequest().body.max_tokens).toBe(5);
    expect(completion.finishReason).toBe("length");
    expect(completion.overrun).toBe(61 - 5);
    expect(completion.usage.output_tokens).toBe(5);
    expect(`Echo: ${long}`.startsWith(completion.text)).toBe(true);
    expect(completion.text.length).toBeLessThan(`Echo: ${long}`.length);
  });

  it("stops relaying a stream at the cap and ends it as truncated", async () => {
    fake.ignoreMaxTokens = true;
    const { pieces, completion } = await drain(provider().stream(ask(long, { maxOutputTokens: 5 }), open()));
    expect(completion.finishReason).toBe("length");
    expect(completion.overrun).toBeGreaterThan(0);
    expect(completion.usage.output_tokens).toBe(5);
    expect(pieces.join("")).toBe(completion.text);
    expect(`Echo: ${long}`.startsWith(completion.text)).toBe(true);
    expect(completion.text.length).toBeLessThan(`Echo: ${long}`.length);
  });

  it("keeps an honest answer within the cap whole", async () => {
    for (const stream of [false, true]) {
      const completion = await answer(stream, ask("one two three", { maxOutputTokens: 4 }));
      expect(completion).toMatchObject({ text: "Echo: one two three", finishReason: "stop" });
      expect(completion.overrun).toBeUndefined();
    }
  });
});

describe("failures, as the OpenAI provider's", () => {
  it.each([false, true])(
    "a 429 is the provider's rate limit with its Retry-After (stream: %s)",
    async (stream) => {
      fake.mode = "rate-limit";
      const err = await failure(stream, ask("hi"));
      expect(err).toBeInstanceOf(ProviderRateLimited);
      expect(err).toMatchObject({ code: "provider_rate_limited", providerStatus: 429 });
      expect(err.headers).toEqual({ "Retry-After": "7" });
      expectNoSecrets(err);
    },
  );

  it.each([
    [529, false],
    [529, true],
    [500, false],
    [500, true],
    [401, false],
  ])(
    "an HTTP %i (stream: %s) fails as the provider's status, without the key or its secrets",
    async (status, stream) => {
      fake.mode = "fail";
      fake.failStatus = status;
      const err = await failure(stream, ask("hi"));
      expect(err).toBeInstanceOf(ProviderFailed);
      expect(err).toMatchObject({ code: "bad_gateway", providerStatus: status });
      expect(err.message).toBe(`The model provider failed: it answered HTTP ${status}`);
      // Enough of what it said stays for the log, the key and the secrets redacted.
      expect(err.providerDetail).toContain("db.internal.example");
      expect(err.providerDetail).toContain("[redacted]");
      expectNoSecrets(err);
    },
  );

  it("an error event in a stream fails it as the status of its type (overloaded: 529), after the text before it", async () => {
    fake.mode = "error-midstream";
    const stream = provider().stream(ask("one two three"), open());
    expect((await stream.next()).value).toBe("Echo: ");
    const err = await stream.next().then(
      () => undefined,
      (e: unknown) => e as ProviderError,
    );
    expect(err).toBeInstanceOf(ProviderFailed);
    expect(err).toMatchObject({
      code: "bad_gateway",
      providerStatus: 529,
      message: "The model provider failed: it reported an error during the stream",
    });
    expect(err!.providerDetail).toContain("overloaded_error");
    expectNoSecrets(err!);
  });

  it("a stream cut after its first chunk fails as a provider failure, not as the socket's error", async () => {
    fake.mode = "break-midstream";
    const stream = provider().stream(ask("one two three"), open());
    expect((await stream.next()).value).toBe("Echo: ");
    const err = await stream.next().then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(ProviderFailed);
    expect(err).toMatchObject({
      code: "bad_gateway",
      message: "The model provider failed: its answer broke off",
    });
  });

  it.each([false, true])("an answer that is not JSON or events fails (stream: %s)", async (stream) => {
    fake.mode = "not-json";
    const err = await failure(stream, ask("hi"));
    expect(err).toBeInstanceOf(ProviderFailed);
    expectNoSecrets(err);
  });

  it("a JSON answer over maxResponseBytes fails, and its connection is let go", async () => {
    fake.mode = "oversized";
    const err = await failure(false, ask("hi"));
    expect(err.message).toContain("over 65536 bytes");
    await vi.waitFor(() => expect(lastRequest().aborted).toBe(true));
  });

  it("a streamed event over maxEventChars fails, and its connection is let go", async () => {
    fake.mode = "oversized";
    const err = await failure(true, ask("one two three"));
    expect(err.message).toContain("over 16384 characters");
    await vi.waitFor(() => expect(lastRequest().aborted).toBe(true));
  });

  it("a streamed answer over maxResponseBytes fails", async () => {
    const err = await failure(true, ask("one two three four five"), { maxResponseBytes: 12 });
    expect(err.message).toContain("over 12 bytes");
  });

  it.each([false, true])(
    "a provider that does not answer is cut off at the deadline, and its connection let go (stream: %s)",
    async (stream) => {
      fake.mode = "stall";
      const err = await failure(stream, ask("hi"), { timeoutMs: 200 });
      expect(err).toBeInstanceOf(ProviderTimeout);
      await vi.waitFor(() => expect(lastRequest().aborted).toBe(true));
    },
  );

  it("a stream that goes silent after its first chunk is cut off at the deadline between chunks", async () => {
    fake.mode = "stall-midstream";
    const stream = provider({ timeoutMs: 200 }).stream(ask("one two three"), open());
    expect((await stream.next()).value).toBe("Echo: ");
    await expect(stream.next()).rejects.toBeInstanceOf(ProviderTimeout);
    await vi.waitFor(() => expect(lastRequest().aborted).toBe(true));
  });
});

describe("abort", () => {
  it("a JSON call stops when its signal aborts, and lets go of the connection", async () => {
    fake.mode = "stall";
    const controller = new AbortController();
    const before = fake.requests.length;
    const call = provider().complete(ask("hi"), controller.signal);
    await vi.waitFor(() => expect(fake.requests.length).toBe(before + 1));
    controller.abort();
    await expect(call).rejects.toThrow();
    await vi.waitFor(() => expect(lastRequest().aborted).toBe(true));
  });

  it("a stream stops when its signal aborts, and lets go of the connection", async () => {
    fake.mode = "stall-midstream";
    const controller = new AbortController();
    const stream = provider().stream(ask("one two three"), controller.signal);
    expect((await stream.next()).value).toBe("Echo: ");
    const next = stream.next();
    controller.abort();
    await expect(next).rejects.toThrow();
    await vi.waitFor(() => expect(lastRequest().aborted).toBe(true));
  });
});

describe("the fake speaks the Messages API as Anthropic documents it", () => {
  // The shapes of Anthropic's API reference (its TypeScript SDK's `RawMessageStreamEvent`s and `Message`),
  // strict: a field the fake invents, or misspells, fails.
  const usage = z.strictObject({
    input_tokens: z.int().nonnegative(),
    output_tokens: z.int().nonnegative(),
    cache_creation_input_tokens: z.int().nonnegative().nullable(),
    cache_read_input_tokens: z.int().nonnegative().nullable(),
  });
  const stopReason = z.enum([
    "end_turn",
    "max_tokens",
    "stop_sequence",
    "tool_use",
    "pause_turn",
    "refusal",
    "model_context_window_exceeded",
  ]);
  const textBlock = z.strictObject({ type: z.literal("text"), text: z.string() });
  const toolUseBlock = z.strictObject({
    type: z.literal("tool_use"),
    id: z.string().min(1),
    name: z.string().min(1),
    input: z.record(z.string(), z.unknown()),
  });
  const message = (content: z.ZodType, stop: z.ZodType) =>
    z.strictObject({
      id: z.string().min(1),
      type: z.literal("message"),
      role: z.literal("assistant"),
      model: z.string().min(1),
      content,
      stop_reason: stop,
      stop_sequence: z.string().nullable(),
      usage,
    });
  const event = z.discriminatedUnion("type", [
    z.strictObject({ type: z.literal("message_start"), message: message(z.tuple([]), z.null()) }),
    z.strictObject({
      type: z.literal("content_block_start"),
      index: z.int().nonnegative(),
      content_block: z.union([textBlock, toolUseBlock]),
    }),
    z.strictObject({ type: z.literal("ping") }),
    z.strictObject({
      type: z.literal("content_block_delta"),
      index: z.int().nonnegative(),
      delta: z.union([
        z.strictObject({ type: z.literal("text_delta"), text: z.string() }),
        z.strictObject({ type: z.literal("input_json_delta"), partial_json: z.string() }),
      ]),
    }),
    z.strictObject({ type: z.literal("content_block_stop"), index: z.int().nonnegative() }),
    z.strictObject({
      type: z.literal("message_delta"),
      delta: z.strictObject({ stop_reason: stopReason, stop_sequence: z.string().nullable() }),
      usage: z.strictObject({ output_tokens: z.int().nonnegative() }),
    }),
    z.strictObject({ type: z.literal("message_stop") }),
    z.strictObject({
      type: z.literal("error"),
      error: z.strictObject({ type: z.string(), message: z.string() }),
    }),
  ]);
  const answer = message(z.array(z.union([textBlock, toolUseBlock])), stopReason);
  const errorBody = z.strictObject({
    type: z.literal("error"),
    error: z.strictObject({ type: z.string(), message: z.string() }),
    request_id: z.string().nullable(),
  });

  const post = (body: Record<string, unknown>, headers: Record<string, string> = {}) =>
    fetch(`${fake.baseUrl}/messages`, {
      method: "POST",
      headers: {
        "content-type": "application/json",
        "x-api-key": KEY,
        "anthropic-version": "2023-06-01",
        ...headers,
      },
      body: JSON.stringify(body),
    });

  /** The events of a streamed answer, each checked against its shape and its SSE name. */
  async function eventsOf(body: Record<string, unknown>) {
    const res = await post({ ...body, stream: true });
    expect(res.headers.get("content-type")).toBe("text/event-stream");
    const events: z.infer<typeof event>[] = [];
    const parser = createParser({
      onEvent: (message) => {
        const parsed = event.parse(JSON.parse(message.data));
        expect(message.event).toBe(parsed.type);
        events.push(parsed);
      },
    });
    parser.feed(await res.text());
    return events;
  }

  /** The order Anthropic documents: message_start; each block's start, deltas and stop, in index order; message_delta; message_stop (pings anywhere between). */
  function expectDocumentedOrder(events: z.infer<typeof event>[]) {
    const types = events.filter((e) => e.type !== "ping");
    expect(types[0]!.type).toBe("message_start");
    expect(types.slice(-2).map((e) => e.type)).toEqual(["message_delta", "message_stop"]);
    let open: number | undefined;
    let next = 0;
    for (const e of types.slice(1, -2)) {
      if (e.type === "content_block_start") {
        expect(open).toBeUndefined();
        expect(e.index).toBe(next);
        open = e.index;
      } else if (e.type === "content_block_delta") {
        expect(e.index).toBe(open);
      } else {
        expect(e).toEqual({ type: "content_block_stop", index: open });
        open = undefined;
        next++;
      }
    }
    expect(open).toBeUndefined();
  }

  const request = (content: string, more: Record<string, unknown> = {}) => ({
    model: "claude-sonnet-4-5",
    max_tokens: 100,
    messages: [{ role: "user", content }],
    ...more,
  });
  const tools = [{ name: "weather", input_schema: WEATHER.parameters }];

  it("streams text, and text then tool_use blocks, in the documented events and order; its JSON answers are Messages", async () => {
    fake.toolPreamble = "Let me look.";
    for (const body of [request("one two three"), request("find it", { tools })]) {
      const events = await eventsOf(body);
      expectDocumentedOrder(events);
      // The streamed blocks add up to the JSON answer's content.
      const whole = answer.parse(await (await post(body)).json());
      const blocks: Record<string, unknown>[] = [];
      const inputs: string[] = [];
      for (const e of events) {
        if (e.type === "content_block_start") {
          blocks.push({ ...e.content_block });
          inputs.push("");
        }
        if (e.type === "content_block_delta" && e.delta.type === "text_delta")
          blocks.at(-1)!.text += e.delta.text;
        if (e.type === "content_block_delta" && e.delta.type === "input_json_delta")
          inputs[inputs.length - 1] += e.delta.partial_json;
      }
      for (const [i, block] of blocks.entries())
        if (block.type === "tool_use") block.input = JSON.parse(inputs[i]!);
      const ids = (list: unknown[]) => list.map((b) => ({ ...(b as object), id: undefined }));
      expect(ids(blocks)).toEqual(ids(whole.content as unknown[]));
      const last = events.findLast((e) => e.type === "message_delta");
      expect(last?.type === "message_delta" && last.delta.stop_reason).toBe(whole.stop_reason);
    }
  });

  it("streams an error event in the documented shape", async () => {
    fake.mode = "error-midstream";
    const events = await eventsOf(request("one two three"));
    expect(events.at(-1)).toMatchObject({ type: "error", error: { type: "overloaded_error" } });
  });

  it.each([429, 500, 529])("answers %i with Anthropic's error body", async (status) => {
    fake.mode = status === 429 ? "rate-limit" : "fail";
    fake.failStatus = status;
    const res = await post(request("hi"));
    expect(res.status).toBe(status);
    const body = errorBody.parse(await res.json());
    expect(body.error.type).toBe(
      { 429: "rate_limit_error", 500: "api_error", 529: "overloaded_error" }[status],
    );
    if (status === 429) expect(res.headers.get("retry-after")).toBe("7");
  });

  it.each<[string, Record<string, unknown>, Record<string, string>?]>([
    ["no max_tokens", { ...request("hi"), max_tokens: undefined }],
    ["a system role among the messages", request("hi", { messages: [{ role: "system", content: "x" }] })],
    [
      "two user turns in a row",
      request("hi", {
        messages: [
          { role: "user", content: "a" },
          { role: "user", content: "b" },
        ],
      }),
    ],
    [
      "an empty text block",
      request("hi", { messages: [{ role: "user", content: [{ type: "text", text: "" }] }] }),
    ],
    [
      "a tool result that answers no tool_use",
      request("hi", {
        messages: [
          { role: "user", content: [{ type: "tool_result", tool_use_id: "toolu_none", content: "x" }] },
        ],
      }),
    ],
    [
      "a tool_use input that is not an object",
      request("hi", {
        messages: [
          { role: "user", content: "hi" },
          { role: "assistant", content: [{ type: "tool_use", id: "t", name: "f", input: "{}" }] },
        ],
      }),
    ],
    ["a tool without input_schema", request("hi", { tools: [{ name: "weather" }] })],
    ["no anthropic-version", request("hi"), { "anthropic-version": "" }],
  ])(
    "refuses, as Anthropic does, a request with %s (so the mapping's tests can fail)",
    async (_, body, headers) => {
      const res = await post(body, headers);
      expect(res.status).toBe(400);
      expect(errorBody.parse(await res.json()).error.type).toBe("invalid_request_error");
    },
  );
});

describe("tracing", () => {
  const exporter = new InMemorySpanExporter();
  beforeAll(async () => {
    await startTracing("anthropic-test", {}, { exporter, simple: true });
  });
  afterAll(() => stopTracing());

  it("a call is a client span of the request's trace, and Anthropic gets its traceparent", async () => {
    let call: Promise<Completion> | undefined;
    const parent = startServerSpan({}, "caller", {}, () => {
      call = provider().complete(ask("trace me"), open());
    });
    await call;
    endSpan(parent);
    await flushTracing();
    const span = exporter.getFinishedSpans().find((s) => s.name === "model provider chat");
    expect(span?.attributes).toMatchObject({
      "gen_ai.operation.name": "chat",
      "gen_ai.provider.name": "anthropic",
      "gen_ai.request.model": "claude-sonnet-4-5",
      "gw.stream": false,
    });
    expect(span?.parentSpanContext?.spanId).toBe(parent?.spanContext().spanId);
    expect(lastRequest().headers.traceparent).toContain(span!.spanContext().spanId);
  });
});
