import { CountingWindows } from "@gw/core/windows";
import { hashedEmbedding } from "@gw/test-kit/llm-upstream";
import { OPENAI_OPENAPI, openaiRequestFields, openaiSchemaProblems } from "@gw/test-kit/openai-schemas";
import { describe, expect, it } from "vitest";
import { llmError, useStack } from "../../../test/stack.ts";
import { utcDay } from "../../usage/store.ts";
import { createEmbeddingBody } from "../request.ts";

const stack = useStack({ LLM_MODELS: "text-embedding-3-small=0.02/0.01/0,echo-small,unpriced-embedder" });
const EMBEDDINGS = "/api/v1/llm/embeddings";
const MODEL = "text-embedding-3-small";
const upstream = () => stack.llm.requests.at(-1)!;

const embed = async (secret: string, json: unknown) => {
  const res = await stack.call(secret, EMBEDDINGS, { json, user: "alice" });
  return { res, body: await res.json() };
};

/** The float32s of a vector as JSON carries them, to compare with what the fake computed in doubles. */
const asFloat32 = (vector: number[]) => Array.from(Float32Array.from(vector));
const cosine = (a: number[], b: number[]) => a.reduce((sum, x, i) => sum + x * b[i]!, 0);
const fromBase64 = (text: string) => {
  const bytes = Buffer.from(text, "base64");
  return Array.from({ length: bytes.length / 4 }, (_, i) => bytes.readFloatLE(i * 4));
};

describe("embeddings", () => {
  it("answers each shape of input in OpenAI's shape, one vector per input in order, from the routed deployment", async () => {
    const key = await stack.createKey();
    const texts = ["the cat sat on the mat", "a cat on a mat", "stock prices fell sharply"];
    const { res, body } = await embed(key.secret, { model: MODEL, input: texts, user: "end-user-7" });
    expect(res.status).toBe(200);
    expect(openaiSchemaProblems("CreateEmbeddingResponse", body)).toEqual([]);
    expect(body).toMatchObject({
      object: "list",
      model: `${MODEL}-2026-01-01`,
      usage: { prompt_tokens: 15, total_tokens: 15 },
    });
    expect(body.data.map((d: { index: number; object: string }) => [d.object, d.index])).toEqual([
      ["embedding", 0],
      ["embedding", 1],
      ["embedding", 2],
    ]);
    for (const [i, text] of texts.entries())
      expect(body.data[i].embedding).toEqual(asFloat32(hashedEmbedding(text)));
    // The fake's vectors carry meaning: texts sharing words are nearer than texts sharing none.
    const [cat, mat, stocks] = body.data.map((d: { embedding: number[] }) => d.embedding);
    expect(cosine(cat, mat)).toBeGreaterThan(cosine(cat, stocks) + 0.3);
    expect(upstream()).toMatchObject({
      kind: "embeddings",
      path: "/v1/embeddings",
      authorization: "Bearer upstream-secret",
      body: { model: MODEL, input: texts, encoding_format: "base64", user: "end-user-7" },
    });

    const one = await embed(key.secret, { model: MODEL, input: "the cat" });
    expect(one.body.data).toEqual([
      { object: "embedding", index: 0, embedding: asFloat32(hashedEmbedding("the cat")) },
    ]);
    const tokens = await embed(key.secret, { model: MODEL, input: [1, 2, 3] });
    expect(tokens.body.data).toHaveLength(1);
    expect(tokens.body.usage.prompt_tokens).toBe(3);
    expect(upstream().body.input).toEqual([[1, 2, 3]]);
    const arrays = await embed(key.secret, { model: MODEL, input: [[1, 2], [3]] });
    expect(arrays.body.data.map((d: { index: number }) => d.index)).toEqual([0, 1]);
    expect(arrays.body.usage.prompt_tokens).toBe(3);
  });

  it("gives base64 the same float32s as float, and honours dimensions", async () => {
    const key = await stack.createKey();
    const input = ["one two three", "four five"];
    const floats = await embed(key.secret, { model: MODEL, input, dimensions: 64 });
    const base64 = await embed(key.secret, {
      model: MODEL,
      input,
      dimensions: 64,
      encoding_format: "base64",
    });
    expect(upstream().body.dimensions).toBe(64);
    expect(base64.res.status).toBe(200);
    for (const i of [0, 1]) {
      expect(typeof base64.body.data[i].embedding).toBe("string");
      expect(floats.body.data[i].embedding).toHaveLength(64);
      expect(fromBase64(base64.body.data[i].embedding)).toEqual(floats.body.data[i].embedding);
    }
  });

  it("refuses a key without responses:write, and a model the key may not use, before the provider is asked", async () => {
    const seen = stack.llm.requests.length;
    const reader = await stack.createKey({ permissions: ["responses:read"] });
    const refused = await embed(reader.secret, { model: MODEL, input: "x" });
    expect(refused.res.status).toBe(403);
    const limited = await stack.createKey({ models: ["echo-small"] });
    const other = await embed(limited.secret, { model: MODEL, input: "x" });
    expect(other.res.status).toBe(403);
    expect(other.body).toEqual(
      llmError("forbidden", `This API key may not use the model '${MODEL}'`, "model"),
    );
    expect(stack.llm.requests.length).toBe(seen);
  });

  it("answers the catalogue's JSON for every input out of bounds, before the provider is asked", async () => {
    const key = await stack.createKey();
    const seen = stack.llm.requests.length;
    const cases: [unknown, (string | number)[], string][] = [
      [{ model: MODEL, input: "" }, ["body", "input"], "string_too_short"],
      [{ model: MODEL, input: ["a", ""] }, ["body", "input", 1], "string_too_short"],
      [{ model: MODEL, input: [] }, ["body", "input"], "too_short"],
      [{ model: MODEL, input: Array.from({ length: 2049 }, () => "a") }, ["body", "input"], "too_long"],
      [{ model: MODEL, input: [[1], []] }, ["body", "input", 1], "too_short"],
      [{ model: MODEL, input: [1.5] }, ["body", "input", 0], "int_type"],
      // Each input at most 8,192 tokens, counted with the model's tokenizer (cl100k_base: " a" is one token).
      [{ model: MODEL, input: ["ok", " a".repeat(8193)] }, ["body", "input", 1], "too_long"],
      [
        { model: MODEL, input: Array.from({ length: 37 }, () => " a".repeat(8150)) },
        ["body", "input"],
        "too_long",
      ],
      [{ model: MODEL, input: "x", encoding_format: "int8" }, ["body", "encoding_format"], "enum"],
      [{ model: MODEL, input: "x", dimensions: 0 }, ["body", "dimensions"], "greater_than_equal"],
      [{ model: MODEL, input: "x", extra: 1 }, ["body", "extra"], "extra_forbidden"],
      [{ input: "x" }, ["body", "model"], "missing"],
    ];
    for (const [json, loc, type] of cases) {
      const { res, body } = await embed(key.secret, json);
      expect({ json: JSON.stringify(json).slice(0, 80), status: res.status }).toEqual({
        json: JSON.stringify(json).slice(0, 80),
        status: 422,
      });
      expect(body.detail[0]).toMatchObject({ loc, type });
      expect(body.error).toMatchObject({ type: "invalid_request_error", code: type });
    }
    expect(stack.llm.requests.length).toBe(seen);
    const unknown = await embed(key.secret, { model: "no-such-model", input: "x" });
    expect(unknown.res.status).toBe(422);
    expect(unknown.body.detail[0]).toMatchObject({ loc: ["body", "model"], type: "enum" });
  });

  it("charges the input tokens the provider reported, at the model's input price, and records them as usage", async () => {
    const limits = { tokens: { day: 1_000 }, spend: { day: 1 } };
    const key = await stack.createKey({ limits });
    const { res, body } = await embed(key.secret, { model: MODEL, input: ["alpha beta gamma", "delta"] });
    expect(res.status).toBe(200);
    expect(res.headers.get("x-ratelimit-limit-tokens")).toBe("1000");
    expect(body.usage).toEqual({ prompt_tokens: 4, total_tokens: 4 });
    const used = Object.fromEntries(
      (await new CountingWindows(stack.redis).peek(key.id, undefined, limits)).map((s) => [s.unit, s.used]),
    );
    // 4 tokens at $0.02 a million, nothing for output.
    expect(used).toEqual({ tokens: 4, spend: (4 * 20) / 1e9 });
    const usage = await (
      await stack.call(key.secret, `/api/v1/usage?start=${utcDay(new Date())}&group_by=model`)
    ).json();
    expect(usage.data).toEqual([
      expect.objectContaining({
        model: `${MODEL}-2026-01-01`,
        requests: 1,
        input_tokens: 4,
        output_tokens: 0,
        deployments: [expect.objectContaining({ provider: "openai", model: MODEL, requests: 1 })],
      }),
    ]);
    expect(usage.totals.cost_usd).toBeCloseTo((4 * 20) / 1e9, 12);
  });

  it("refuses a call whose input tokens the budget cannot take, and an unpriced model under a spend limit, before the provider is asked", async () => {
    const key = await stack.createKey({ limits: { tokens: { day: 5 } } });
    const seen = stack.llm.requests.length;
    const over = await embed(key.secret, { model: MODEL, input: "one two three four five six" });
    expect(over.res.status).toBe(429);
    const spender = await stack.createKey({ limits: { spend: { day: 1 } } });
    const unpriced = await embed(spender.secret, { model: "unpriced-embedder", input: "x" });
    expect(unpriced.res.status).toBe(403);
    expect(unpriced.body.error.param).toBe("model");
    expect(stack.llm.requests.length).toBe(seen);
  });

  it("counts in the key's request windows, and in each end user's", async () => {
    const key = await stack.createKey({ limits: { minute: 1 } });
    expect((await embed(key.secret, { model: MODEL, input: "x" })).res.status).toBe(200);
    expect((await embed(key.secret, { model: MODEL, input: "x" })).res.status).toBe(429);
    const perUser = await stack.createKey({ limits: { endUser: { minute: 1 } } });
    const as = (user: string) =>
      stack.call(perUser.secret, EMBEDDINGS, { json: { model: MODEL, input: "x" }, user });
    expect((await as("alice")).status).toBe(200);
    const refused = await as("alice");
    expect(refused.status).toBe(429);
    expect(refused.headers.get("retry-after")).toBeTruthy();
    expect((await as("bob")).status).toBe(200);
  });

  it("gives back the reservation when the provider fails, and answers its failure in OpenAI's shape", async () => {
    const limits = { tokens: { day: 1_000 } };
    const key = await stack.createKey({ limits });
    stack.llm.mode = "fail";
    try {
      const { res, body } = await embed(key.secret, { model: MODEL, input: "one two" });
      expect(res.status).toBe(502);
      expect(body).toEqual(llmError("bad_gateway", expect.stringContaining("500")));
      expect(JSON.stringify(body)).not.toContain("pg-pass");
    } finally {
      stack.llm.mode = "ok";
    }
    const [tokens] = await new CountingWindows(stack.redis).peek(key.id, undefined, limits);
    expect(tokens!.used).toBe(0);
  });

  it("takes exactly the request fields of OpenAI's CreateEmbeddingRequest", () => {
    expect(Object.keys(createEmbeddingBody.shape).sort()).toEqual(
      openaiRequestFields("CreateEmbeddingRequest").sort(),
    );
    expect(OPENAI_OPENAPI.version).toBeTruthy();
  });
});
