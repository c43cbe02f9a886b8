import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { scanKeys } from "@gw/test-kit";
import { type FakeAnthropic, startFakeAnthropic } from "@gw/test-kit/anthropic-upstream";
import { type FakeLLM, startFakeLLM } from "@gw/test-kit/llm-upstream";
import { pythonPrints, useOpenaiPython } from "@gw/test-kit/python-venv";
import OpenAI from "openai";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { runCli } from "../../packages/gateway/test/run-cli.ts";
import { useStack } from "../../packages/service/test/stack.ts";

/**
 * The OpenAI client libraries, unchanged, through a model name whose first
 * deployment fails: `gpt-4o` on A (which the tests make answer 500, or hang),
 * then its fallback `gpt-4o-mini` on C. The client sees one ordinary answer.
 * And through `claude`, an Anthropic deployment (the fake Messages API): the
 * client speaks OpenAI's API as ever.
 */
const serviceEnv: Record<string, string> = {
  LLM_BASE_URL: "",
  LLM_API_KEY: "",
  LLM_DEFAULT_MODEL: "",
  LLM_RETRY_BACKOFF_MS: "0",
};
let a: FakeLLM;
let c: FakeLLM;
let anthropic: FakeAnthropic;
let dir: string;
beforeAll(async () => {
  [a, c, anthropic] = await Promise.all([startFakeLLM(), startFakeLLM(), startFakeAnthropic()]);
  dir = await mkdtemp(join(tmpdir(), "gw-e2e-providers-"));
  serviceEnv.MODELS_FILE = join(dir, "models.yaml");
  await writeFile(
    serviceEnv.MODELS_FILE,
    `models:
  - name: gpt-4o
    fallbacks: [gpt-4o-mini]
    deployments: [{provider: openai, base_url: "${a.baseUrl}", model: gpt-4o-a, timeout_ms: 300}]
  - name: gpt-4o-mini
    deployments: [{provider: openai, base_url: "${c.baseUrl}", model: mini-c}]
  - name: claude
    deployments: [{provider: anthropic, base_url: "${anthropic.baseUrl}", api_key: anthropic-key, model: claude-x}]
`,
  );
});
const stack = useStack(serviceEnv);
afterAll(async () => {
  await Promise.all([a.close(), c.close(), anthropic.close()]);
  await rm(dir, { recursive: true, force: true });
});
beforeEach(async () => {
  a.mode = "fail";
  for (const key of await scanKeys(stack.redis, "gw:llm:cooldown:*")) await stack.redis.del(key);
});

describe("the official openai SDK through a fallback", () => {
  const client = async () =>
    new OpenAI({
      apiKey: (await stack.createKey()).secret,
      baseURL: `${stack.gatewayUrl}/api/v1/llm`,
      maxRetries: 0,
    });

  it("gets a chat completion, whole and streamed, from the fallback", async () => {
    const openai = await client();
    const completion = await openai.chat.completions.create({
      model: "gpt-4o",
      messages: [{ role: "user", content: "through the fallback" }],
    });
    expect(completion.choices[0]?.message.content).toBe("Echo: through the fallback");
    expect(completion.model).toBe("mini-c-2026-01-01");

    a.mode = "stall";
    const stream = await openai.chat.completions.create({
      model: "gpt-4o",
      messages: [{ role: "user", content: "streamed after a hang" }],
      stream: true,
      stream_options: { include_usage: true },
    });
    let text = "";
    let usage: unknown;
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta?.content ?? "";
      usage ??= chunk.usage ?? undefined;
    }
    expect(text).toBe("Echo: streamed after a hang");
    expect(usage).toMatchObject({ completion_tokens: 5 });
  });

  it("gets a response, whole and streamed, from the fallback", async () => {
    const openai = await client();
    const response = await openai.responses.create({ model: "gpt-4o", input: "a response", store: false });
    expect(response.output_text).toBe("Echo: a response");
    const stream = await openai.responses.create({ model: "gpt-4o", input: "a streamed one", stream: true });
    const types: string[] = [];
    let text = "";
    for await (const event of stream) {
      types.push(event.type);
      if (event.type === "response.output_text.delta") text += event.delta;
    }
    expect(types[0]).toBe("response.created");
    expect(types.at(-1)).toBe("response.completed");
    expect(text).toBe("Echo: a streamed one");
  });
});

describe("the official openai SDK through an Anthropic deployment", () => {
  const client = async () =>
    new OpenAI({
      apiKey: (await stack.createKey()).secret,
      baseURL: `${stack.gatewayUrl}/api/v1/llm`,
      maxRetries: 0,
    });
  const tools = [{ type: "function" as const, function: { name: "lookup", parameters: { type: "object" } } }];

  it("gets a chat completion, whole and streamed, and a tool call", async () => {
    const openai = await client();
    const completion = await openai.chat.completions.create({
      model: "claude",
      messages: [
        { role: "system", content: "be brief" },
        { role: "user", content: "from anthropic" },
      ],
    });
    expect(completion.choices[0]?.message.content).toBe("Echo: from anthropic");
    expect(completion.model).toBe("claude-x-20260101");
    expect(anthropic.requests.at(-1)?.headers["x-api-key"]).toBe("anthropic-key");

    const stream = await openai.chat.completions.create({
      model: "claude",
      messages: [{ role: "user", content: "streamed from anthropic" }],
      stream: true,
      stream_options: { include_usage: true },
    });
    let text = "";
    let usage: unknown;
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta?.content ?? "";
      usage ??= chunk.usage ?? undefined;
    }
    expect(text).toBe("Echo: streamed from anthropic");
    expect(usage).toMatchObject({ completion_tokens: 4 });

    const called = await openai.chat.completions.create({
      model: "claude",
      messages: [{ role: "user", content: "look it up" }],
      tools,
    });
    expect(called.choices[0]?.finish_reason).toBe("tool_calls");
    const [call] = called.choices[0]?.message.tool_calls ?? [];
    expect(call).toMatchObject({ type: "function", function: { name: "lookup" } });
    const answered = await openai.chat.completions.create({
      model: "claude",
      messages: [
        { role: "user", content: "look it up" },
        called.choices[0]!.message,
        { role: "tool", tool_call_id: call!.id, content: "the tool's answer" },
      ],
      tools,
    });
    expect(answered.choices[0]?.message.content).toBe("Echo: the tool's answer");
  });

  it("gets a response, whole and streamed", async () => {
    const openai = await client();
    const response = await openai.responses.create({ model: "claude", input: "a response", store: false });
    expect(response.output_text).toBe("Echo: a response");
    const stream = await openai.responses.create({ model: "claude", input: "a streamed one", stream: true });
    const types: string[] = [];
    let text = "";
    for await (const event of stream) {
      types.push(event.type);
      if (event.type === "response.output_text.delta") text += event.delta;
    }
    expect(types[0]).toBe("response.created");
    expect(types.at(-1)).toBe("response.completed");
    expect(text).toBe("Echo: a streamed one");
  });
});

describe("pnpm keys usage", () => {
  it("shows the key's calls this month by model and the deployment that served them", async () => {
    const key = await stack.createKey();
    const openai = new OpenAI({
      apiKey: key.secret,
      baseURL: `${stack.gatewayUrl}/api/v1/llm`,
      maxRetries: 0,
    });
    for (const model of ["gpt-4o", "gpt-4o", "claude"])
      await openai.chat.completions.create({ model, messages: [{ role: "user", content: "counted" }] });
    const other = await stack.createKey({ org: key.org });
    await new OpenAI({
      apiKey: other.secret,
      baseURL: `${stack.gatewayUrl}/api/v1/llm`,
      maxRetries: 0,
    }).chat.completions.create({
      model: "claude",
      messages: [{ role: "user", content: "not this key's" }],
    });
    const served = async () => {
      const out = await runCli("keys", ["usage", key.id], { REDIS_URL: stack.redisUrl });
      expect(out.code).toBe(0);
      return JSON.parse(out.stdout).served;
    };
    await expect.poll(async () => (await served()).models.length).toBe(2);
    const { from, to, models } = await served();
    expect(from).toBe(`${to.slice(0, 8)}01`);
    // The fallback served gpt-4o's calls: that is the deployment shown, not the one that failed. A model
    // is named as in the usage report, by the model the provider said answered.
    expect(models).toEqual([
      expect.objectContaining({
        model: "mini-c-2026-01-01",
        requests: 2,
        deployments: [expect.objectContaining({ provider: "openai", model: "mini-c", requests: 2 })],
      }),
      expect.objectContaining({
        model: "claude-x-20260101",
        requests: 1,
        deployments: [expect.objectContaining({ provider: "anthropic", model: "claude-x", requests: 1 })],
      }),
    ]);
  });
});

describe("openai-python through a fallback", () => {
  const openaiPython = useOpenaiPython();
  it("gets a chat completion from the fallback", async (ctx) => {
    const python = openaiPython(ctx);
    if (!python) return;
    const key = await stack.createKey();
    const script = [
      "import os, openai",
      "client = openai.OpenAI(api_key=os.environ['GATEWAY_KEY'], base_url=os.environ['GATEWAY_URL'] + '/api/v1/llm', max_retries=0)",
      "c = client.chat.completions.create(model='gpt-4o', messages=[{'role': 'user', 'content': 'from python'}])",
      "print(c.model, c.choices[0].message.content, sep='|')",
    ].join("\n");
    const stdout = await pythonPrints(python, ["-c", script], {
      GATEWAY_URL: stack.gatewayUrl,
      GATEWAY_KEY: key.secret,
    });
    expect(stdout.trim()).toBe("mini-c-2026-01-01|Echo: from python");
  });

  it("gets a chat completion, whole and streamed, from an Anthropic deployment", async (ctx) => {
    const python = openaiPython(ctx);
    if (!python) return;
    const key = await stack.createKey();
    const script = [
      "import os, openai",
      "client = openai.OpenAI(api_key=os.environ['GATEWAY_KEY'], base_url=os.environ['GATEWAY_URL'] + '/api/v1/llm', max_retries=0)",
      "c = client.chat.completions.create(model='claude', messages=[{'role': 'user', 'content': 'python to claude'}])",
      "s = client.chat.completions.create(model='claude', messages=[{'role': 'user', 'content': 'streamed'}], stream=True)",
      "print(c.model, c.choices[0].message.content, ''.join(k.choices[0].delta.content or '' for k in s if k.choices), sep='|')",
    ].join("\n");
    const stdout = await pythonPrints(python, ["-c", script], {
      GATEWAY_URL: stack.gatewayUrl,
      GATEWAY_KEY: key.secret,
    });
    expect(stdout.trim()).toBe("claude-x-20260101|Echo: python to claude|Echo: streamed");
  });
});
