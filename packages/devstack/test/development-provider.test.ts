import { connect } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  type DevelopmentProvider,
  MAX_ANSWER_TOKENS,
  startDevelopmentProvider,
  tokensOf,
} from "../src/development-provider.ts";
import { hashedEmbedding } from "../src/hashed-embeddings.ts";

const CREATED_MS = Date.UTC(2026, 0, 1);

describe("the development model provider", () => {
  let provider: DevelopmentProvider;
  beforeAll(async () => {
    provider = await startDevelopmentProvider({ port: 0, maxRequestBytes: 64 * 1024, now: () => CREATED_MS });
  });
  afterAll(() => provider?.close());

  const post = (body: unknown, path = "/chat/completions") =>
    fetch(`${provider.baseUrl}${path}`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: typeof body === "string" ? body : JSON.stringify(body),
    });
  const complete = async (body: Record<string, unknown>) => {
    const res = await post({ model: "echo", ...body });
    expect(res.status).toBe(200);
    return res.json();
  };
  /** The events of a streamed answer, `[DONE]` as a string. */
  const events = async (body: Record<string, unknown>) => {
    const res = await post({ model: "echo", stream: true, ...body });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("text/event-stream");
    const text = await res.text();
    expect(text.endsWith("\n\n")).toBe(true);
    return text
      .trimEnd()
      .split("\n\n")
      .map((event) => {
        expect(event.startsWith("data: ")).toBe(true);
        const data = event.slice("data: ".length);
        return data === "[DONE]" ? data : JSON.parse(data);
      });
  };
  const hello = [
    { role: "system", content: "Be brief." },
    { role: "user", content: "hi there" },
    { role: "assistant", content: "hi there" },
    {
      role: "user",
      content: [
        { type: "text", text: "hello, " },
        { type: "text", text: "world" },
      ],
    },
  ];

  it("answers with the last user message, its usage counted in its tokens", async () => {
    expect(tokensOf("hello, world")).toEqual(["hel", "lo, ", "wor", "ld"]);
    const answer = await complete({ messages: hello });
    // Prompt: each message's tokens and 3 more, and 3 for the reply.
    const prompt = 3 + (3 + 3) + (3 + 3) + (3 + 3) + (4 + 3); // "Be |bri|ef.", "hi |the|re", …
    expect(answer).toEqual({
      id: expect.stringMatching(/^chatcmpl-dev-\d+$/),
      object: "chat.completion",
      created: CREATED_MS / 1000,
      model: "echo",
      choices: [
        {
          index: 0,
          message: { role: "assistant", content: "hello, world", refusal: null },
          finish_reason: "stop",
          logprobs: null,
        },
      ],
      usage: {
        prompt_tokens: prompt,
        completion_tokens: 4,
        total_tokens: prompt + 4,
        prompt_tokens_details: { cached_tokens: 0 },
        completion_tokens_details: { reasoning_tokens: 0 },
      },
    });
  });

  it("answers n choices, the usage counting them all", async () => {
    const answer = await complete({ messages: [{ role: "user", content: "hello, world" }], n: 3 });
    expect(
      answer.choices.map((c: { index: number; message: { content: string } }) => [
        c.index,
        c.message.content,
      ]),
    ).toEqual([
      [0, "hello, world"],
      [1, "hello, world"],
      [2, "hello, world"],
    ]);
    expect(answer.usage).toMatchObject({
      completion_tokens: 3 * 4,
      total_tokens: answer.usage.prompt_tokens + 12,
    });
  });

  it("streams the same answer a token an event, with a usage chunk only when asked for", async () => {
    const streamed = await events({ messages: hello, stream_options: { include_usage: true } });
    expect(streamed.at(-1)).toBe("[DONE]");
    const chunks = streamed.slice(0, -1);
    expect(chunks.every((c) => c.object === "chat.completion.chunk" && c.model === "echo")).toBe(true);
    expect(chunks[0].choices[0].delta).toEqual({ role: "assistant", content: "" });
    const deltas = chunks.slice(1, -2).map((c) => c.choices[0].delta.content);
    expect(deltas).toEqual(["hel", "lo, ", "wor", "ld"]);
    expect(chunks.at(-2).choices).toEqual([{ index: 0, delta: {}, finish_reason: "stop", logprobs: null }]);
    const whole = await complete({ messages: hello });
    expect(chunks.at(-1)).toMatchObject({ choices: [], usage: whole.usage });

    const quiet = await events({ messages: hello });
    expect(quiet.filter((c) => c !== "[DONE]" && c.usage)).toEqual([]);
    expect(quiet.at(-2).choices[0].finish_reason).toBe("stop");
  });

  it("stops at max_tokens (or max_completion_tokens), and at its own longest answer, as truncated", async () => {
    const cut = await complete({ messages: hello, max_tokens: 3 });
    expect(cut.choices[0]).toMatchObject({ message: { content: "hello, wor" }, finish_reason: "length" });
    expect(cut.usage.completion_tokens).toBe(3);
    const streamed = await events({
      messages: hello,
      max_completion_tokens: 2,
      stream_options: { include_usage: true },
    });
    const chunks = streamed.slice(0, -1);
    expect(chunks.slice(1, -2).map((c) => c.choices[0].delta.content)).toEqual(["hel", "lo, "]);
    expect(chunks.at(-2).choices[0].finish_reason).toBe("length");
    expect(chunks.at(-1).usage.completion_tokens).toBe(2);

    const long = "abc ".repeat(MAX_ANSWER_TOKENS + 10);
    const longest = await complete({ messages: [{ role: "user", content: long }] });
    expect(longest.choices[0]).toMatchObject({
      message: { content: "abc ".repeat(MAX_ANSWER_TOKENS) },
      finish_reason: "length",
    });
    expect(longest.usage.completion_tokens).toBe(MAX_ANSWER_TOKENS);
  });

  describe("tools", () => {
    const tools = [
      {
        type: "function",
        function: {
          name: "get_weather",
          parameters: {
            type: "object",
            properties: {
              city: { type: "string" },
              unit: { type: "string", enum: ["celsius", "fahrenheit"] },
              days: { type: "integer" },
              detailed: { type: "boolean" },
              note: { type: "string" },
            },
            required: ["city", "unit", "days", "detailed"],
          },
        },
      },
      { type: "function", function: { name: "lookup", parameters: { type: "object", properties: {} } } },
    ];
    const ask = [{ role: "user", content: "Paris" }];

    it("calls none unless asked to: with tools and tool_choice auto, none or unset it answers", async () => {
      for (const choice of [undefined, "auto", "none"]) {
        const answer = await complete({ messages: ask, tools, tool_choice: choice });
        expect(answer.choices[0]).toMatchObject({ message: { content: "Paris" }, finish_reason: "stop" });
        expect(answer.choices[0].message.tool_calls).toBeUndefined();
      }
    });

    it('"required" calls the first tool, with arguments from its schema; a named tool is called by name', async () => {
      const required = await complete({ messages: ask, tools, tool_choice: "required" });
      const [call] = required.choices[0].message.tool_calls;
      expect(required.choices[0]).toMatchObject({ message: { content: null }, finish_reason: "tool_calls" });
      expect(call).toEqual({
        id: expect.stringMatching(/^call_dev_\d+$/),
        type: "function",
        function: { name: "get_weather", arguments: expect.any(String) },
      });
      expect(JSON.parse(call.function.arguments)).toEqual({
        city: "Paris",
        unit: "celsius",
        days: 0,
        detailed: false,
      });
      expect(required.usage.completion_tokens).toBe(tokensOf(call.function.arguments).length);

      const named = await complete({
        messages: ask,
        tools,
        tool_choice: { type: "function", function: { name: "lookup" } },
      });
      expect(named.choices[0].message.tool_calls).toEqual([
        { id: expect.any(String), type: "function", function: { name: "lookup", arguments: "{}" } },
      ]);
    });

    it("streams a call as OpenAI does: its id and name, then its arguments", async () => {
      const streamed = await events({ messages: ask, tools, tool_choice: "required" });
      const chunks = streamed.slice(0, -1);
      expect(chunks[0].choices[0].delta).toEqual({ role: "assistant", content: null });
      const [announced, args] = [chunks[1].choices[0].delta, chunks[2].choices[0].delta];
      expect(announced.tool_calls).toEqual([
        {
          index: 0,
          id: expect.stringMatching(/^call_dev_/),
          type: "function",
          function: { name: "get_weather", arguments: "" },
        },
      ]);
      expect(JSON.parse(args.tool_calls[0].function.arguments)).toMatchObject({ city: "Paris" });
      expect(chunks.at(-1).choices[0].finish_reason).toBe("tool_calls");
    });

    it("after a tool's output it answers with that output, whatever tool_choice says", async () => {
      const answer = await complete({
        messages: [
          ...ask,
          {
            role: "assistant",
            content: null,
            tool_calls: [{ id: "c1", type: "function", function: { name: "lookup", arguments: "{}" } }],
          },
          { role: "tool", tool_call_id: "c1", content: "18 degrees" },
        ],
        tools,
        tool_choice: "required",
      });
      expect(answer.choices[0]).toMatchObject({ message: { content: "18 degrees" }, finish_reason: "stop" });
    });

    it("refuses a named tool that is not among the tools, and required without tools", async () => {
      for (const [body, param] of [
        [{ tools, tool_choice: { type: "function", function: { name: "nope" } } }, "tool_choice"],
        [{ tool_choice: "required" }, "tool_choice"],
      ] as const) {
        const res = await post({ model: "echo", messages: ask, ...body });
        expect(res.status).toBe(400);
        expect((await res.json()).error).toMatchObject({ type: "invalid_request_error", param });
      }
    });
  });

  describe("embeddings", () => {
    const cosine = (a: number[], b: number[]) => a.reduce((sum, x, i) => sum + x * b[i]!, 0);
    const embed = async (body: Record<string, unknown>) => {
      const res = await post({ model: "text-embedding-3-small", ...body }, "/embeddings");
      return { status: res.status, body: await res.json() };
    };

    it("answers hashed word counts of length 1, texts that share words nearer than texts that share none", async () => {
      const texts = ["The cat sat on the mat", "the CAT, on a mat!", "stock prices fell sharply"];
      const { status, body } = await embed({ input: texts });
      expect(status).toBe(200);
      expect(body).toMatchObject({
        object: "list",
        model: "text-embedding-3-small",
        usage: { prompt_tokens: expect.any(Number) },
      });
      const vectors = body.data.map((d: { embedding: number[] }) => d.embedding);
      expect(body.data.map((d: { index: number }) => d.index)).toEqual([0, 1, 2]);
      for (const v of vectors) {
        expect(v).toHaveLength(256);
        expect(cosine(v, v)).toBeCloseTo(1, 12);
      }
      // Case and punctuation aside, the first two share four of their words; the third shares none.
      expect(cosine(vectors[0], vectors[1])).toBeGreaterThan(0.6);
      expect(cosine(vectors[0], vectors[2])).toBeLessThan(0.2);
      expect(vectors[0]).toEqual(hashedEmbedding("the cat sat on the mat"));
      // The same text, the same vector, every time.
      expect((await embed({ input: "The cat sat on the mat" })).body.data[0].embedding).toEqual(vectors[0]);
    });

    it("honours dimensions and encoding_format base64 (little-endian float32s), and takes token arrays", async () => {
      const floats = (await embed({ input: "one two", dimensions: 8 })).body.data[0].embedding;
      expect(floats).toHaveLength(8);
      const base64 = (await embed({ input: "one two", dimensions: 8, encoding_format: "base64" })).body
        .data[0].embedding as string;
      const bytes = Buffer.from(base64, "base64");
      expect(Array.from({ length: 8 }, (_, i) => bytes.readFloatLE(i * 4))).toEqual(
        Array.from(Float32Array.from(floats)),
      );
      const tokens = await embed({ input: [[1, 2, 3], [4]] });
      expect(tokens.body.data).toHaveLength(2);
      expect(tokens.body.usage.prompt_tokens).toBe(4);
    });

    it("refuses what OpenAI refuses, in its error shape: an empty input, a chat model, bad dimensions", async () => {
      for (const [body, status, param] of [
        [{ input: "" }, 400, "input"],
        [{ input: [] }, 400, "input"],
        [{ input: "x", model: "echo" }, 404, "model"],
        [{ input: "x", dimensions: 0 }, 400, "dimensions"],
        [{ input: "x", encoding_format: "int8" }, 400, "encoding_format"],
      ] as const) {
        const res = await embed(body);
        expect(res.status).toBe(status);
        expect(res.body.error).toMatchObject({ type: "invalid_request_error", param });
      }
    });
  });

  it("lists its models as owned by development", async () => {
    const list = await fetch(`${provider.baseUrl}/models`);
    expect(await list.json()).toEqual({
      object: "list",
      data: [
        { id: "echo", object: "model", created: 0, owned_by: "development" },
        { id: "text-embedding-3-small", object: "model", created: 0, owned_by: "development" },
      ],
    });
    expect(await (await fetch(`${provider.baseUrl}/models/echo`)).json()).toEqual({
      id: "echo",
      object: "model",
      created: 0,
      owned_by: "development",
    });
    expect((await fetch(`${provider.baseUrl}/models/gpt-4o`)).status).toBe(404);
  });

  it("refuses what it cannot answer in OpenAI's error shape: another model, bad JSON, no messages, another URL", async () => {
    const cases: [Response, number, Record<string, unknown>][] = [
      [
        await post({ model: "gpt-4o", messages: [{ role: "user", content: "x" }] }),
        404,
        { param: "model", code: "model_not_found" },
      ],
      [await post("{not json"), 400, { param: null }],
      [await post({ model: "echo", messages: [] }), 400, { param: "messages" }],
      [
        await post({ model: "echo", messages: [{ role: "user", content: "x" }], max_tokens: 0 }),
        400,
        { param: "max_tokens" },
      ],
      [await post({}, "/completions"), 404, { code: "unknown_url" }],
    ];
    for (const [res, status, error] of cases) {
      expect(res.status).toBe(status);
      expect((await res.json()).error).toMatchObject({ type: "invalid_request_error", ...error });
    }
  });

  it("refuses a body over its limit without reading it, and keeps serving", async () => {
    const big = JSON.stringify({
      model: "echo",
      messages: [{ role: "user", content: "a".repeat(64 * 1024) }],
    });
    const res = await post(big);
    expect(res.status).toBe(413);
    expect((await res.json()).error.message).toBe(`The request body is over ${64 * 1024} bytes.`);
    // Sent in chunks, with no length announced: counted as it comes.
    const chunked = await fetch(`${provider.baseUrl}/chat/completions`, {
      method: "POST",
      body: new ReadableStream({
        start(controller) {
          for (let i = 0; i < 80; i++) controller.enqueue(new TextEncoder().encode("a".repeat(1024)));
          controller.close();
        },
      }),
      duplex: "half",
    } as RequestInit);
    expect(chunked.status).toBe(413);
    expect(
      (await complete({ messages: [{ role: "user", content: "still here" }] })).choices[0].message.content,
    ).toBe("still here");
  });

  it("listens on 127.0.0.1 only", async () => {
    const reaches = (host: string) =>
      new Promise<boolean>((resolve) => {
        const socket = connect({ port: provider.port, host });
        socket.once("connect", () => {
          socket.destroy();
          resolve(true);
        });
        socket.once("error", () => resolve(false));
      });
    expect(await reaches("127.0.0.1")).toBe(true);
    expect(await reaches("127.0.0.2")).toBe(false);
  });
});
