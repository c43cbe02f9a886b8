import { randomBytes } from "node:crypto";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Limits } from "@gw/core/limits";
import { flushTracing, startTracing, stopTracing } from "@gw/core/tracing";
import { CountingWindows } from "@gw/core/windows";
import { scanKeys } from "@gw/test-kit";
import { type FakeLLM, startFakeLLM } from "@gw/test-kit/llm-upstream";
import { InMemorySpanExporter } from "@opentelemetry/sdk-trace";
import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from "vitest";
import { ATTEMPT_OUTCOMES } from "../src/llm/router.ts";
import { utcDay } from "../src/usage/store.ts";
import { llmError, parseEvents, useStack } from "./stack.ts";

/**
 * A catalogue of three deployments through the whole stack: `gpt-4o` on an
 * OpenAI-compatible deployment (A, first, expensive) and on Azure (B, when
 * A failed or cools down, cheaper), with `gpt-4o-mini` (C) as its fallback.
 * Each is a test provider of its own, whose failures the tests switch on.
 */
const PRICES = {
  a: { input: 10, cached_input: 5, output: 40 },
  b: { input: 1, cached_input: 0.5, output: 2 },
  c: { input: 0.1, cached_input: 0.05, output: 0.2 },
};
// Neither looks like a key to the log's patterns (no `sk-` prefix, under 40 characters): only the catalogue knows them.
const KEY_A = "deployment-a-0123456789abcdef";
const KEY_B = "azure-key-b-0123456789abcdef";

const serviceEnv: Record<string, string> = {
  // The stack's shorthand is unset (empty counts as unset): the catalogue names every deployment.
  LLM_BASE_URL: "",
  LLM_API_KEY: "",
  LLM_DEFAULT_MODEL: "",
  LLM_RETRY_BACKOFF_MS: "0",
  LLM_RETRY_AFTER_MAX_S: "60",
};
let a: FakeLLM;
let b: FakeLLM;
let c: FakeLLM;
let dir: string;
beforeAll(async () => {
  [a, b, c] = await Promise.all([startFakeLLM(), startFakeLLM(), startFakeLLM()]);
  dir = await mkdtemp(join(tmpdir(), "gw-routing-"));
  const file = join(dir, "models.yaml");
  await writeFile(
    file,
    `
models:
  - name: gpt-4o
    fallbacks: [gpt-4o-mini]
    deployments:
      - provider: openai
        base_url: ${a.baseUrl}
        api_key: ${KEY_A}
        model: gpt-4o-a
        timeout_ms: 400
        price: ${JSON.stringify(PRICES.a)}
      - provider: azure
        base_url: ${b.baseUrl.replace(/\/v1$/, "")}
        api_key: ${KEY_B}
        api_version: 2024-10-21
        model: gpt-4o-b
        priority: 1
        price: ${JSON.stringify(PRICES.b)}
  - name: gpt-4o-mini
    deployments:
      - {provider: openai, base_url: "${c.baseUrl}", api_key: sk-c, model: mini-c, price: ${JSON.stringify(PRICES.c)}}
routing:
  retries: 2
  cooldown: {failures: 2, window_s: 60, seconds: 600}
`,
  );
  serviceEnv.MODELS_FILE = file;
});
// Before the stack starts (its clients install their span hooks only when tracing is on); stopped after it.
const exporter = new InMemorySpanExporter();
await startTracing("routing-test", {}, { exporter, simple: true });
afterAll(() => stopTracing());
const stack = useStack(serviceEnv);
afterAll(async () => {
  await Promise.all([a.close(), b.close(), c.close()]);
  await rm(dir, { recursive: true, force: true });
});

/** Every deployment answers again, and no cooldown is left from an earlier test. */
beforeEach(async () => {
  for (const fake of [a, b, c]) {
    fake.mode = "ok";
    fake.failStatus = 500;
    fake.failBody = undefined;
    fake.retryAfter = "7";
  }
  const keys = await scanKeys(stack.redis, "gw:llm:cooldown:*");
  for (const key of keys) await stack.redis.del(key);
});

const ask = (secret: string, body: Record<string, unknown> = {}) =>
  stack.call(secret, "/api/v1/llm/chat/completions", {
    json: { model: "gpt-4o", messages: [{ role: "user", content: "one two three" }], ...body },
    user: "alice",
  });
const metrics = async () => (await fetch(`${stack.serviceUrl}/metrics`)).text();
const sample = (text: string, name: string, labels: string) =>
  Number(new RegExp(`^${name}\\{${labels.replace(/[{}]/g, "\\$&")}\\} (\\S+)$`, "m").exec(text)?.[1] ?? 0);
const A = 'model="gpt-4o",deployment="gpt-4o#0",provider="openai"';
const B = 'model="gpt-4o",deployment="gpt-4o#1",provider="azure"';
const today = () => utcDay(new Date());

describe("a model name routed across deployments", () => {
  it("has every attempt outcome of every deployment on /metrics from the start, at 0 until one happens", async () => {
    const text = await metrics();
    for (const outcome of ATTEMPT_OUTCOMES) {
      expect(text, outcome).toMatch(
        new RegExp(`^service_llm_attempts_total\\{${B},outcome="${outcome}"\\} \\d+$`, "m"),
      );
    }
  });

  it("serves a call through the second deployment when the first answers 500, and the client sees only the answer", async () => {
    const key = await stack.createKey();
    a.mode = "fail";
    const before = { a: a.requests.length, b: b.requests.length };
    const res = await ask(key.secret);
    expect(res.status).toBe(200);
    const body = await res.json();
    expect(body.choices[0].message.content).toBe("Echo: one two three");
    expect(body.model).toBe("gpt-4o-b-2026-01-01");
    expect(a.requests.length - before.a).toBe(1);
    expect(a.requests.at(-1)).toMatchObject({ authorization: `Bearer ${KEY_A}`, apiKey: undefined });
    expect(a.requests.at(-1)!.body.model).toBe("gpt-4o-a");
    // Azure: the deployment in the path, the API version in the query, the key in `api-key`.
    expect(b.requests.length - before.b).toBe(1);
    expect(b.requests.at(-1)).toMatchObject({
      path: "/openai/deployments/gpt-4o-b/chat/completions?api-version=2024-10-21",
      apiKey: KEY_B,
      authorization: undefined,
    });
  });

  it("shows each attempt as a span of its own, naming its deployment", async () => {
    const key = await stack.createKey();
    a.mode = "fail";
    const traceId = randomBytes(16).toString("hex");
    const res = await stack.call(key.secret, "/api/v1/llm/chat/completions", {
      json: { model: "gpt-4o", messages: [{ role: "user", content: "traced" }] },
      headers: { traceparent: `00-${traceId}-00f067aa0ba902b7-01` },
    });
    expect(res.status).toBe(200);
    await flushTracing();
    const attempts = exporter
      .getFinishedSpans()
      .filter((s) => s.spanContext().traceId === traceId && s.name === "model provider chat")
      .sort((x, y) => (x.startTime[0] - y.startTime[0]) * 1e9 + (x.startTime[1] - y.startTime[1]));
    expect(
      attempts.map((s) => [
        s.attributes["gw.deployment"],
        s.attributes["gen_ai.request.model"],
        s.status.code,
      ]),
    ).toEqual([
      ["gpt-4o#0", "gpt-4o-a", 2], // SpanStatusCode.ERROR
      ["gpt-4o#1", "gpt-4o-b", 0],
    ]);
  });

  it("counts the retry and, at the catalogue's count of failures, cools the failing deployment down for every later call", async () => {
    const key = await stack.createKey();
    a.mode = "fail";
    const start = await metrics();
    expect((await ask(key.secret)).status).toBe(200);
    expect((await ask(key.secret)).status).toBe(200);
    const cooled = await metrics();
    const delta = (name: string, labels: string) =>
      sample(cooled, name, labels) - sample(start, name, labels);
    expect(delta("service_llm_attempts_total", `${A},outcome="server_error"`)).toBe(2);
    expect(delta("service_llm_retries_total", B)).toBe(2);
    expect(delta("service_llm_deployment_requests_total", B)).toBe(2);
    expect(delta("service_llm_cooldowns_total", A)).toBe(1);
    expect(sample(cooled, "service_llm_deployment_cooling", A)).toBe(1);
    expect(sample(cooled, "service_llm_deployment_cooling", B)).toBe(0);

    // Cooling: the next call goes straight to B, even once A answers again.
    a.mode = "ok";
    const seen = a.requests.length;
    expect((await ask(key.secret)).status).toBe(200);
    expect(a.requests.length).toBe(seen);
  });

  it("honours a provider's Retry-After: its deployment cools down at once for that long", async () => {
    const key = await stack.createKey();
    a.mode = "rate-limit";
    a.retryAfter = "7";
    expect((await ask(key.secret)).status).toBe(200);
    const [cool] = await scanKeys(stack.redis, "gw:llm:cooldown:{gpt-4o}:0:cool");
    const left = await stack.redis.pttl(cool!);
    expect(left).toBeGreaterThan(0);
    expect(left).toBeLessThanOrEqual(7_000);
    const seen = a.requests.length;
    expect((await ask(key.secret)).status).toBe(200);
    expect(a.requests.length).toBe(seen);
  });

  it("leaves a deployment that hangs at its timeout, and serves the call from the next", async () => {
    const key = await stack.createKey();
    a.mode = "stall";
    const res = await ask(key.secret, { stream: true });
    expect(res.status).toBe(200);
    const events = (await res.text()).split("\n\n").filter((e) => e.startsWith("data: {"));
    expect(events.map((e) => JSON.parse(e.slice(6)).choices[0]?.delta?.content ?? "").join("")).toBe(
      "Echo: one two three",
    );
    await vi.waitFor(() => expect(a.requests.at(-1)?.aborted).toBe(true));
  });

  it("never retries a stream that broke after its first chunk reached the client, and charges what it produced at its deployment's price", async () => {
    const key = await stack.createKey({ limits: { spend: { day: 1 } } });
    a.mode = "error-midstream";
    const before = b.requests.length;
    const start = await metrics();
    const res = await stack.call(key.secret, "/api/v1/llm/responses", {
      json: { model: "gpt-4o", input: "one two three", stream: true },
      user: "alice",
    });
    expect(res.status).toBe(200);
    const events = parseEvents(await res.text());
    expect(events.map((e) => e.type)).toContain("response.output_text.delta");
    expect(events.at(-1)?.type).toBe("response.failed");
    expect(b.requests.length).toBe(before);
    // The attempt is counted as the stream that broke it is.
    const after = await metrics();
    const delta = (labels: string) =>
      sample(after, "service_llm_attempts_total", labels) -
      sample(start, "service_llm_attempts_total", labels);
    expect(delta(`${A},outcome="broken"`)).toBe(1);
    const usage = await (
      await stack.call(key.secret, `/api/v1/usage?start=${today()}&group_by=model`)
    ).json();
    expect(usage.data).toEqual([
      expect.objectContaining({
        model: "gpt-4o",
        deployments: [expect.objectContaining({ provider: "openai", model: "gpt-4o-a", requests: 1 })],
      }),
    ]);
    const { input_tokens, output_tokens } = usage.totals;
    expect(output_tokens).toBeGreaterThan(0);
    expect(usage.totals.cost_usd).toBeCloseTo((input_tokens * 10_000 + output_tokens * 40_000) / 1e9, 12);
  });
});

describe("budgets priced per deployment", () => {
  const used = async (keyId: string, limits: Limits) =>
    Object.fromEntries(
      (await new CountingWindows(stack.redis).peek(keyId, undefined, limits)).map((s) => [
        `${s.unit}:${s.window}`,
        s.used,
      ]),
    );

  it("reserves at the highest price the call may reach, and settles at the price of the deployment that answered", async () => {
    const limits = { spend: { day: 1 } };
    const key = await stack.createKey({ limits });
    a.mode = "fail";
    // Held at B: the reservation stands while it answers, at A's price (the highest of A, B and C).
    b.mode = "hold";
    const before = b.requests.length;
    const call = ask(key.secret, { max_tokens: 20 });
    await vi.waitFor(() => expect(b.requests.length).toBe(before + 1));
    // The output cap alone at A's price is more than the whole call could cost at B's.
    expect((await used(key.id, limits))["spend:day"]).toBeGreaterThanOrEqual((20 * 40_000) / 1e9);
    b.release();
    const res = await call;
    expect(res.status).toBe(200);
    const { usage } = await res.json();
    const atB = (usage.prompt_tokens * 1_000 + usage.completion_tokens * 2_000) / 1e9;
    expect((await used(key.id, limits))["spend:day"]).toBeCloseTo(atB, 12);

    const byModel = await (
      await stack.call(key.secret, `/api/v1/usage?start=${today()}&group_by=model`)
    ).json();
    expect(byModel.totals.cost_usd).toBeCloseTo(atB, 12);
    expect(byModel.data).toEqual([
      expect.objectContaining({
        model: "gpt-4o-b-2026-01-01",
        deployments: [
          expect.objectContaining({
            provider: "azure",
            model: "gpt-4o-b",
            requests: 1,
            cost_usd: byModel.totals.cost_usd,
          }),
        ],
      }),
    ]);
  });

  it("charges nothing for a failed attempt that produced no tokens", async () => {
    const limits = { tokens: { day: 100_000 } };
    const key = await stack.createKey({ limits });
    a.mode = "fail";
    const res = await ask(key.secret);
    const { usage } = await res.json();
    expect((await used(key.id, limits))["tokens:day"]).toBe(usage.total_tokens);
  });
});

describe("fallbacks and the key's model allowlist", () => {
  it("comes to the fallback once every deployment of the name failed, when the key may use it", async () => {
    const key = await stack.createKey({ models: ["gpt-4o", "gpt-4o-mini"] });
    a.mode = "fail";
    b.mode = "fail";
    const before = c.requests.length;
    const res = await ask(key.secret);
    expect(res.status).toBe(200);
    expect((await res.json()).model).toBe("mini-c-2026-01-01");
    expect(c.requests.length - before).toBe(1);
    expect(
      sample(await metrics(), "service_llm_fallbacks_total", 'model="gpt-4o",fallback="gpt-4o-mini"'),
    ).toBeGreaterThan(0);
  });

  it("never reaches a fallback the key may not use: the last provider error is the answer", async () => {
    const key = await stack.createKey({ models: ["gpt-4o"] });
    a.mode = "fail";
    b.mode = "fail";
    b.failStatus = 503;
    const before = c.requests.length;
    const res = await ask(key.secret);
    expect(res.status).toBe(502);
    expect(await res.json()).toEqual(llmError("bad_gateway", expect.stringContaining("503")));
    expect(c.requests.length).toBe(before);
  });

  it("keeps every deployment's key out of the log, whichever provider's text carries it", async () => {
    const key = await stack.createKey({ models: ["gpt-4o"] });
    a.mode = "fail";
    b.mode = "fail";
    // A provider that echoes credentials: its own, and another deployment's.
    b.failBody = JSON.stringify({ error: { message: `bad keys ${KEY_B} and ${KEY_A}` } });
    const res = await ask(key.secret);
    expect(res.status).toBe(502);
    const logged = JSON.stringify(
      stack.serviceLogs.filter((line) => line.requestId === res.headers.get("x-request-id")),
    );
    expect(logged).toContain("bad keys [redacted]");
    expect(logged).not.toContain(KEY_A);
    expect(logged).not.toContain(KEY_B);
  });

  it("lists the catalogue's names the key may use, `auto` being the first", async () => {
    const any = await stack.createKey();
    const names = async (secret: string) =>
      ((await (await stack.call(secret, "/api/v1/llm/models")).json()).data as { id: string }[]).map(
        (m) => m.id,
      );
    expect(await names(any.secret)).toEqual(["gpt-4o", "gpt-4o-mini"]);
    const mini = await stack.createKey({ models: ["gpt-4o-mini"] });
    expect(await names(mini.secret)).toEqual(["gpt-4o-mini"]);
    const res = await ask(any.secret, { model: "auto" });
    expect((await res.json()).model).toBe("gpt-4o-a-2026-01-01");
    expect((await ask(mini.secret)).status).toBe(403);
  });
});
