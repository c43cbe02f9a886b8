import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { CountingWindows } from "@gw/core/windows";
import { scanKeys } from "@gw/test-kit";
import { type FakeAnthropic, startFakeAnthropic } from "@gw/test-kit/anthropic-upstream";
import { type FakeLLM, startFakeLLM } from "@gw/test-kit/llm-upstream";
import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from "vitest";
import { utcDay } from "../src/usage/store.ts";
import { llmError, useStack } from "./stack.ts";

/**
 * Embeddings through a catalogue of deployments, through the whole stack:
 * `embed` on an OpenAI-compatible deployment (A, first, expensive) and on
 * Azure (B, when A failed, cheaper); `embed-anthropic` on an Anthropic
 * deployment only (no embeddings API); `embed-mixed` on an Anthropic
 * deployment first and an OpenAI-compatible one after it.
 */
const PRICES = { a: { input: 10, output: 0 }, b: { input: 1, output: 0 } };
const serviceEnv: Record<string, string> = {
  LLM_BASE_URL: "",
  LLM_API_KEY: "",
  LLM_DEFAULT_MODEL: "",
  LLM_RETRY_BACKOFF_MS: "0",
};
let a: FakeLLM;
let b: FakeLLM;
let anthropic: FakeAnthropic;
let dir: string;
beforeAll(async () => {
  [a, b, anthropic] = await Promise.all([startFakeLLM(), startFakeLLM(), startFakeAnthropic()]);
  dir = await mkdtemp(join(tmpdir(), "gw-embeddings-routing-"));
  serviceEnv.MODELS_FILE = join(dir, "models.yaml");
  await writeFile(
    serviceEnv.MODELS_FILE,
    `models:
  - name: embed
    deployments:
      - {provider: openai, base_url: "${a.baseUrl}", api_key: key-a, model: embed-a, price: ${JSON.stringify(PRICES.a)}}
      - {provider: azure, base_url: "${b.baseUrl.replace(/\/v1$/, "")}", api_key: key-b, api_version: 2024-10-21, model: embed-b, priority: 1, price: ${JSON.stringify(PRICES.b)}}
  - name: embed-anthropic
    deployments: [{provider: anthropic, base_url: "${anthropic.baseUrl}", api_key: anthropic-key, model: claude-x}]
  - name: embed-mixed
    deployments:
      - {provider: anthropic, base_url: "${anthropic.baseUrl}", api_key: anthropic-key, model: claude-x}
      - {provider: openai, base_url: "${a.baseUrl}", api_key: key-a, model: embed-a, priority: 1}
`,
  );
});
const stack = useStack(serviceEnv);
afterAll(async () => {
  await Promise.all([a.close(), b.close(), anthropic.close()]);
  await rm(dir, { recursive: true, force: true });
});
beforeEach(async () => {
  a.mode = "ok";
  b.mode = "ok";
  for (const key of await scanKeys(stack.redis, "gw:llm:cooldown:*")) await stack.redis.del(key);
});

const embed = (secret: string, json: Record<string, unknown>) =>
  stack.call(secret, "/api/v1/llm/embeddings", { json, user: "alice" });

describe("embeddings routed across deployments", () => {
  it("comes to the Azure deployment when the first answers 500, reserved at the highest price and settled at Azure's, its usage marked with it", async () => {
    const limits = { spend: { day: 1 } };
    const key = await stack.createKey({ limits });
    const spent = async () =>
      (await new CountingWindows(stack.redis).peek(key.id, undefined, limits))[0]!.used;
    a.mode = "fail";
    b.mode = "hold";
    const seen = { a: a.requests.length, b: b.requests.length };
    const call = embed(key.secret, { model: "embed", input: ["one two three", "four"] });
    await vi.waitFor(() => expect(b.requests.length).toBe(seen.b + 1));
    // While B holds the answer, the reservation stands at A's price, the highest the call may reach.
    const reserved = await spent();
    b.release();
    const res = await call;
    expect(res.status).toBe(200);
    const body = await res.json();
    expect(body.model).toBe("embed-b-2026-01-01");
    expect(body.data).toHaveLength(2);
    expect(a.requests.length - seen.a).toBe(1);
    expect(a.requests.at(-1)).toMatchObject({ path: "/v1/embeddings", authorization: "Bearer key-a" });
    expect(b.requests.at(-1)).toMatchObject({
      kind: "embeddings",
      path: "/openai/deployments/embed-b/embeddings?api-version=2024-10-21",
      apiKey: "key-b",
      body: { model: "embed-b", input: ["one two three", "four"], encoding_format: "base64" },
    });
    const tokens = body.usage.prompt_tokens;
    expect(tokens).toBe(4);
    expect(reserved).toBeGreaterThanOrEqual((tokens * 10_000) / 1e9);
    expect(await spent()).toBeCloseTo((tokens * 1_000) / 1e9, 12);
    const usage = await (
      await stack.call(key.secret, `/api/v1/usage?start=${utcDay(new Date())}&group_by=model`)
    ).json();
    expect(usage.data).toEqual([
      expect.objectContaining({
        model: "embed-b-2026-01-01",
        input_tokens: tokens,
        output_tokens: 0,
        deployments: [expect.objectContaining({ provider: "azure", model: "embed-b", requests: 1 })],
      }),
    ]);
    expect(usage.totals.cost_usd).toBeCloseTo((tokens * 1_000) / 1e9, 12);
  });

  it("answers the last provider error once every deployment failed, and gives the reservation back", async () => {
    const limits = { tokens: { day: 1_000 } };
    const key = await stack.createKey({ limits });
    a.mode = "fail";
    b.mode = "fail";
    b.failStatus = 503;
    try {
      const res = await embed(key.secret, { model: "embed", input: "x" });
      expect(res.status).toBe(502);
      expect(await res.json()).toEqual(llmError("bad_gateway", expect.stringContaining("503")));
    } finally {
      b.failStatus = 500;
    }
    expect((await new CountingWindows(stack.redis).peek(key.id, undefined, limits))[0]!.used).toBe(0);
  });

  it("refuses a model served only by a provider without embeddings (Anthropic) with a 400 naming why, and passes such a deployment over otherwise", async () => {
    const key = await stack.createKey();
    const before = anthropic.requests.length;
    const refused = await embed(key.secret, { model: "embed-anthropic", input: "x" });
    expect(refused.status).toBe(400);
    expect(await refused.json()).toEqual(
      llmError("bad_request", expect.stringMatching(/cannot make embeddings.*embeddings API/), "model"),
    );
    const seen = a.requests.length;
    const mixed = await embed(key.secret, { model: "embed-mixed", input: "x" });
    expect(mixed.status).toBe(200);
    expect((await mixed.json()).model).toBe("embed-a-2026-01-01");
    expect(a.requests.length).toBe(seen + 1);
    expect(anthropic.requests.length).toBe(before);
  });
});
