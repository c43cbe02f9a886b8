import { randomBytes } from "node:crypto";
import { systemClock } from "@gw/core/clock";
import { AppError } from "@gw/core/errors";
import type { Limits } from "@gw/core/limits";
import type { Principal } from "@gw/core/principal";
import { createRedis, type RedisClient } from "@gw/core/redis";
import { CountingWindows } from "@gw/core/windows";
import { startTestRedis } from "@gw/test-kit";
import { type FakeLLM, hashedEmbedding, startFakeLLM } from "@gw/test-kit/llm-upstream";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { testBudgetDeps } from "../../test/budget-deps.ts";
import { testProvider } from "../../test/providers.ts";
import type { Caller } from "../budgets/admit-model-call.ts";
import { ids } from "../ids.ts";
import { UsageStore } from "../usage/store.ts";
import { type EmbeddingCallDeps, embedTexts } from "./embeddings.ts";

/**
 * `embedTexts` as the service's own code calls it (a vector store's
 * ingestion, on behalf of the key that attached a file): no route and no
 * gateway, so the caller's request windows count here; real Redis (budgets,
 * usage) and the test provider.
 */

let teardown: () => Promise<void>;
let deps: EmbeddingCallDeps;
let windows: CountingWindows;
let redis: RedisClient;
let llm: FakeLLM;

beforeAll(async () => {
  const [redisServer, fake] = await Promise.all([startTestRedis(), startFakeLLM()]);
  llm = fake;
  redis = createRedis(redisServer.url, { connectionName: "test" });
  windows = new CountingWindows(redis);
  deps = {
    provider: testProvider({ baseUrl: llm.baseUrl, apiKey: "test", timeoutMs: 2_000, ids: ids(systemClock) }),
    usage: new UsageStore(redis),
    budgets: testBudgetDeps(redis, { windows }),
  };
  teardown = async () => {
    redis.disconnect();
    await Promise.all([redisServer.stop(), llm.close()]);
  };
});
afterAll(() => teardown());

const LIMITS: Limits = { minute: 2, tokens: { day: 1_000 } };

/** A caller no gateway counted: a fresh organization's key, on behalf of nobody but its owner. */
function callerOf(models?: string[]) {
  const principal: Principal = {
    org: `org-${randomBytes(4).toString("hex")}`,
    user: "backend",
    keyId: `key_${randomBytes(4).toString("hex")}`,
    permissions: [],
    credential: "api_key",
    onBehalfOf: false,
    ...(models ? { models } : {}),
  };
  const caller: Caller = { principal, admission: { limits: LIMITS }, requestsCounted: false };
  return { principal, caller };
}
const used = async (principal: Principal) =>
  Object.fromEntries(
    (await windows.peek(principal.keyId, undefined, LIMITS)).map((s) => [`${s.unit}:${s.window}`, s.used]),
  );
const usageOf = async (principal: Principal) => {
  const day = new Date().toISOString().slice(0, 10);
  return (await deps.usage.query(principal.org, day, day)).totals;
};

describe("embedTexts", () => {
  it("embeds for the caller: one vector per text, its tokens charged and recorded as its usage, its request windows counted", async () => {
    const { principal, caller } = callerOf();
    const texts = ["alpha beta", "gamma"];
    const embedded = await embedTexts(deps, caller, {
      model: "text-embedding-3-small",
      input: texts,
      dimensions: 16,
    });
    expect(embedded.vectors.map((v) => Array.from(v))).toEqual(
      texts.map((t) => Array.from(Float32Array.from(hashedEmbedding(t, 16)))),
    );
    expect(embedded.usage).toEqual({ prompt_tokens: 3, total_tokens: 3 });
    expect(embedded.model).toBe("text-embedding-3-small-2026-01-01");
    expect(embedded.servedBy).toMatchObject({ provider: "openai", upstreamModel: "text-embedding-3-small" });
    expect(await used(principal)).toEqual({ "requests:minute": 1, "tokens:day": 3 });
    expect(await usageOf(principal)).toMatchObject({ requests: 1, input_tokens: 3, output_tokens: 0 });

    await embedTexts(deps, caller, { model: "text-embedding-3-small", input: "one" });
    const refused = embedTexts(deps, caller, { model: "text-embedding-3-small", input: "two" });
    await expect(refused).rejects.toMatchObject({ code: "rate_limited" });
  });

  it("refuses a model the caller's key may not use, and an empty text, before the provider is asked", async () => {
    const seen = llm.requests.length;
    const { caller } = callerOf(["another-model"]);
    await expect(
      embedTexts(deps, caller, { model: "text-embedding-3-small", input: "x" }),
    ).rejects.toMatchObject({
      code: "forbidden",
      param: "model",
    });
    const { caller: anyModel } = callerOf();
    const empty = await embedTexts(deps, anyModel, {
      model: "text-embedding-3-small",
      input: ["x", ""],
    }).catch((err: unknown) => err);
    expect(empty).toBeInstanceOf(AppError);
    expect(empty).toMatchObject({ code: "validation_failed", issues: [{ loc: ["body", "input", 1] }] });
    expect(llm.requests.length).toBe(seen);
  });

  it("charges the counted tokens when the caller stops waiting while the provider works", async () => {
    const { principal, caller } = callerOf();
    llm.mode = "hold";
    const abort = new AbortController();
    const seen = llm.requests.length;
    try {
      const call = embedTexts(
        deps,
        caller,
        { model: "text-embedding-3-small", input: "one two three" },
        abort.signal,
      );
      await vi.waitFor(() => expect(llm.requests.length).toBe(seen + 1));
      abort.abort(new Error("gone"));
      await expect(call).rejects.toBeDefined();
    } finally {
      llm.release();
    }
    // Counted with cl100k_base, the tokenizer of OpenAI's embedding models: three tokens.
    expect((await used(principal))["tokens:day"]).toBe(3);
    expect(await usageOf(principal)).toMatchObject({ requests: 1, input_tokens: 3 });
  });
});
