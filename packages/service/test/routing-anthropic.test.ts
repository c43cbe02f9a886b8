import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { CountingWindows } from "@gw/core/windows";
import { scanKeys } from "@gw/test-kit";
import { type FakeAnthropic, startFakeAnthropic } from "@gw/test-kit/anthropic-upstream";
import { type FakeLLM, startFakeLLM } from "@gw/test-kit/llm-upstream";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { utcDay } from "../src/usage/store.ts";
import { llmError, parseEvents, useStack } from "./stack.ts";

/**
 * An Anthropic deployment in the model catalogue, through the whole stack:
 * `claude` is served by the fake Messages API, and `gpt-4o` (an
 * OpenAI-compatible deployment the tests make fail) falls back to it. The
 * caller speaks OpenAI's chat completions and Responses and never sees the
 * Messages API.
 */
const KEY = "anthropic-deployment-key-0123456789";
const PRICE = { input: 3, cached_input: 0.3, output: 15 };

const serviceEnv: Record<string, string> = {
  LLM_BASE_URL: "",
  LLM_API_KEY: "",
  LLM_DEFAULT_MODEL: "",
  LLM_RETRY_BACKOFF_MS: "0",
};
let anthropic: FakeAnthropic;
let openai: FakeLLM;
let dir: string;
beforeAll(async () => {
  [anthropic, openai] = await Promise.all([startFakeAnthropic(), startFakeLLM()]);
  dir = await mkdtemp(join(tmpdir(), "gw-routing-anthropic-"));
  serviceEnv.MODELS_FILE = join(dir, "models.yaml");
  await writeFile(
    serviceEnv.MODELS_FILE,
    `models:
  - name: claude
    deployments:
      - provider: anthropic
        base_url: ${anthropic.baseUrl}
        api_key: ${KEY}
        model: claude-upstream
        price: ${JSON.stringify(PRICE)}
  - name: gpt-4o
    fallbacks: [claude]
    deployments: [{provider: openai, base_url: "${openai.baseUrl}", model: gpt-4o-a}]
`,
  );
});
const stack = useStack(serviceEnv);
afterAll(async () => {
  await Promise.all([anthropic.close(), openai.close()]);
  await rm(dir, { recursive: true, force: true });
});
beforeEach(async () => {
  anthropic.mode = "ok";
  anthropic.cacheReadTokens = 0;
  anthropic.cacheWriteTokens = 0;
  openai.mode = "ok";
  for (const key of await scanKeys(stack.redis, "gw:llm:cooldown:*")) await stack.redis.del(key);
});

const TOOLS = [
  {
    type: "function",
    function: { name: "lookup", description: "Looks a word up", parameters: { type: "object" } },
  },
];
const chat = (secret: string, body: Record<string, unknown>) =>
  stack.call(secret, "/api/v1/llm/chat/completions", {
    json: { model: "claude", messages: [{ role: "user", content: "one two three" }], ...body },
    user: "alice",
  });
const responses = (secret: string, body: Record<string, unknown>) =>
  stack.call(secret, "/api/v1/llm/responses", { json: { model: "claude", ...body }, user: "alice" });
/** The text of a response's message items. */
const textOf = (response: { output: { type: string; content?: { type: string; text?: string }[] }[] }) =>
  response.output
    .filter((o) => o.type === "message")
    .flatMap((o) => o.content ?? [])
    .map((c) => c.text ?? "")
    .join("");
/** The data of each `data: {…}` line of a chat-completions stream. */
const chunksOf = (text: string) =>
  text
    .split("\n\n")
    .filter((e) => e.startsWith("data: {"))
    .map((e) => JSON.parse(e.slice(6)));

describe("chat completions through an Anthropic deployment", () => {
  it("answers JSON in OpenAI's shape; the Messages API gets the upstream model id and the deployment's key as x-api-key", async () => {
    const key = await stack.createKey();
    const before = anthropic.requests.length;
    const res = await chat(key.secret, {
      messages: [
        { role: "system", content: "be brief" },
        { role: "user", content: "one two three" },
      ],
    });
    expect(res.status).toBe(200);
    const body = await res.json();
    expect(body).toMatchObject({
      object: "chat.completion",
      model: "claude-upstream-20260101",
      choices: [{ message: { role: "assistant", content: "Echo: one two three" }, finish_reason: "stop" }],
    });
    expect(anthropic.requests.length - before).toBe(1);
    const sent = anthropic.requests.at(-1)!;
    expect(sent.path).toBe("/v1/messages");
    expect(sent.headers["x-api-key"]).toBe(KEY);
    expect(sent.headers.authorization).toBeUndefined();
    expect(sent.body.model).toBe("claude-upstream");
    expect(sent.body.system).toEqual(expect.anything());
    expect(sent.body.messages).toEqual([{ role: "user", content: expect.anything() }]);
  });

  it("streams a tool call as OpenAI's tool_calls deltas, ending with finish_reason tool_calls", async () => {
    const key = await stack.createKey();
    const res = await chat(key.secret, {
      tools: TOOLS,
      stream: true,
      stream_options: { include_usage: true },
    });
    expect(res.status).toBe(200);
    const chunks = chunksOf(await res.text());
    const calls = chunks.flatMap((c) => c.choices[0]?.delta?.tool_calls ?? []);
    expect(calls[0]).toMatchObject({
      index: 0,
      id: expect.stringMatching(/^toolu_/),
      function: { name: "lookup" },
    });
    expect(JSON.parse(calls.map((c) => c.function?.arguments ?? "").join(""))).toEqual({
      text: "one two three",
    });
    expect(chunks.map((c) => c.choices[0]?.finish_reason).filter(Boolean)).toEqual(["tool_calls"]);
    expect(chunks.at(-1)?.usage).toMatchObject({ completion_tokens: expect.any(Number) });
    expect(anthropic.requests.at(-1)!.body).toMatchObject({
      stream: true,
      tools: [{ name: "lookup", input_schema: { type: "object" } }],
    });
  });

  it("settles usage at the Anthropic deployment's price, cache reads at its cached price, and names the deployment", async () => {
    const key = await stack.createKey();
    anthropic.cacheReadTokens = 100;
    const res = await chat(key.secret, {});
    const { usage } = await res.json();
    expect(usage.prompt_tokens_details.cached_tokens).toBe(100);
    const today = utcDay(new Date());
    const report = await (await stack.call(key.secret, `/api/v1/usage?start=${today}&group_by=model`)).json();
    const uncached = usage.prompt_tokens - 100;
    const cost =
      (uncached * PRICE.input + 100 * PRICE.cached_input + usage.completion_tokens * PRICE.output) / 1e6;
    expect(report.totals.cost_usd).toBeCloseTo(cost, 9);
    expect(report.data).toEqual([
      expect.objectContaining({
        deployments: [
          expect.objectContaining({ provider: "anthropic", model: "claude-upstream", requests: 1 }),
        ],
      }),
    ]);
  });
});

describe("responses through an Anthropic deployment", () => {
  it("report the prompt cache's reads and writes in input_tokens_details", async () => {
    const key = await stack.createKey();
    anthropic.cacheReadTokens = 10;
    anthropic.cacheWriteTokens = 5;
    const res = await responses(key.secret, { input: "hello" });
    expect(res.status).toBe(200);
    const { usage } = await res.json();
    expect(usage.input_tokens_details).toEqual({ cached_tokens: 10, cache_write_tokens: 5 });
    expect(usage.input_tokens).toBeGreaterThanOrEqual(15);
  });

  it("answers a tool call as a function_call item, then the tool's output as the next turn", async () => {
    const key = await stack.createKey();
    const first = await responses(key.secret, {
      input: "find this",
      tools: [{ type: "function", name: "lookup", parameters: { type: "object" } }],
    });
    expect(first.status).toBe(200);
    const asked = await first.json();
    const call = asked.output.find((o: { type: string }) => o.type === "function_call");
    expect(call).toMatchObject({ name: "lookup", call_id: expect.stringMatching(/^toolu_/) });
    expect(JSON.parse(call.arguments)).toEqual({ text: "find this" });

    const second = await responses(key.secret, {
      previous_response_id: asked.id,
      input: [{ type: "function_call_output", call_id: call.call_id, output: "found it" }],
      tools: [{ type: "function", name: "lookup", parameters: { type: "object" } }],
    });
    expect(second.status).toBe(200);
    expect(textOf(await second.json())).toBe("Echo: found it");
    // The Messages API got the turn as tool_use, then its tool_result, in alternating turns.
    const { messages } = anthropic.requests.at(-1)!.body;
    expect(messages.map((m) => m.role)).toEqual(["user", "assistant", "user"]);
    expect(JSON.stringify(messages[2]!.content)).toContain(`"tool_use_id":"${call.call_id}"`);
  });

  it("streams its text as Responses events", async () => {
    const key = await stack.createKey();
    const res = await responses(key.secret, { input: "a streamed one", stream: true });
    expect(res.status).toBe(200);
    const events = parseEvents(await res.text());
    expect(events[0]?.type).toBe("response.created");
    expect(events.at(-1)?.type).toBe("response.completed");
    expect(
      events
        .filter((e) => e.type === "response.output_text.delta")
        .map((e) => e.data.delta)
        .join(""),
    ).toBe("Echo: a streamed one");
    expect(events.at(-1)?.data.response.model).toBe("claude-upstream-20260101");
  });
});

describe("an Anthropic deployment as a fallback", () => {
  it("serves a call whose OpenAI-compatible deployment answered 500, when the key may use it", async () => {
    const key = await stack.createKey({ models: ["gpt-4o", "claude"] });
    openai.mode = "fail";
    const before = anthropic.requests.length;
    const res = await chat(key.secret, { model: "gpt-4o" });
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({
      model: "claude-upstream-20260101",
      choices: [{ message: { content: "Echo: one two three" } }],
    });
    expect(anthropic.requests.length - before).toBe(1);
  });

  it("retries an Anthropic 529 (overloaded) on nothing else when there is nothing else: the caller gets a 502", async () => {
    const key = await stack.createKey();
    anthropic.mode = "fail";
    anthropic.failStatus = 529;
    const res = await chat(key.secret, {});
    expect(res.status).toBe(502);
    const body = await res.json();
    expect(body.error.code).toBe("bad_gateway");
    expect(JSON.stringify(body)).not.toContain(KEY);
  });
});

describe("fields Anthropic's Messages API has not", () => {
  const LIMITS = { tokens: { day: 1_000_000 } };
  const tokensUsed = async (keyId: string) =>
    (await new CountingWindows(stack.redis).peek(keyId, undefined, LIMITS)).find((s) => s.unit === "tokens")!
      .used;

  it.each([
    [{ n: 2 }, "n"],
    [{ presence_penalty: 0.5 }, "presence_penalty"],
    [{ frequency_penalty: -1 }, "frequency_penalty"],
    [{ logit_bias: { "42": -100 } }, "logit_bias"],
    [{ logprobs: true }, "logprobs"],
    [{ logprobs: true, top_logprobs: 2 }, "top_logprobs"],
  ])(
    "refuses %j for an Anthropic deployment by name, before anything is reserved or sent",
    async (fields, param) => {
      const key = await stack.createKey({ limits: LIMITS });
      const before = anthropic.requests.length;
      const res = await chat(key.secret, fields);
      expect(res.status).toBe(400);
      expect(await res.json()).toEqual(
        llmError(
          "bad_request",
          `${param} is not supported by the provider of the model 'claude' (anthropic): leave it out, or use a model whose provider takes it`,
          param,
        ),
      );
      expect(anthropic.requests.length).toBe(before);
      expect(await tokensUsed(key.id)).toBe(0);
    },
  );

  it("refuses a response's top_logprobs for an Anthropic deployment by name", async () => {
    const key = await stack.createKey();
    const before = anthropic.requests.length;
    const res = await responses(key.secret, { input: "hi", top_logprobs: 2 });
    expect(res.status).toBe(400);
    expect((await res.json()).error).toMatchObject({ code: "bad_request", param: "top_logprobs" });
    // Asked for as Responses asks for them, in `include`: the refusal names `include`.
    const included = await responses(key.secret, { input: "hi", include: ["message.output_text.logprobs"] });
    expect(included.status).toBe(400);
    expect((await included.json()).error).toMatchObject({
      code: "bad_request",
      param: "include",
      message: expect.stringMatching(/^include is not supported by the provider of the model/),
    });
    expect(anthropic.requests.length).toBe(before);
  });

  it("sends them to the OpenAI-compatible deployment of a name, and never falls back to an Anthropic one with them", async () => {
    const key = await stack.createKey({ models: ["gpt-4o", "claude"] });
    const ok = await chat(key.secret, { model: "gpt-4o", presence_penalty: 0.5, n: 2 });
    expect(ok.status).toBe(200);
    expect((await ok.json()).choices).toHaveLength(2);
    expect(openai.requests.at(-1)!.body).toMatchObject({ presence_penalty: 0.5, n: 2 });

    openai.mode = "fail";
    const before = anthropic.requests.length;
    const res = await chat(key.secret, { model: "gpt-4o", presence_penalty: 0.5 });
    expect(res.status).toBe(502);
    expect(anthropic.requests.length).toBe(before);
    // Without the field, the same call falls back as before.
    expect((await chat(key.secret, { model: "gpt-4o" })).status).toBe(200);
    expect(anthropic.requests.length).toBe(before + 1);
  });
});
