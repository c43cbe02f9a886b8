import type { Limits } from "@gw/core/limits";
import { CountingWindows } from "@gw/core/windows";
import { OrgLimitsStore } from "@gw/gateway";
import { rawHttp } from "@gw/test-kit";
import { beforeEach, describe, expect, it } from "vitest";
import { countPromptTokens } from "../src/llm/tokens.ts";
import { utcDay } from "../src/usage/store.ts";
import { useStack } from "./stack.ts";

const MODEL = "gpt-4o-mini";
// Dollars per million tokens: input, cached input, output.
const stack = useStack({
  LLM_MODELS: `${MODEL}=0.15/0.075/0.6,echo-small`,
  LLM_DEFAULT_MAX_OUTPUT_TOKENS: "64",
});

/** What the service reserves for one call: the prompt as the tokenizer counts it, plus the output cap. */
const reservationFor = async (input: string, maxOutput: number) =>
  (await countPromptTokens({ model: MODEL, messages: [{ role: "user", content: input }] })) + maxOutput;

describe("token and spend budgets", () => {
  let today = utcDay(new Date());
  beforeEach(() => {
    today = utcDay(new Date());
  });
  const windows = () => new CountingWindows(stack.redis);
  const used = async (keyId: string, limits: Limits, user?: string) =>
    Object.fromEntries(
      (await windows().peek(keyId, user, limits)).map((s) => [`${s.scope}:${s.unit}:${s.window}`, s.used]),
    );
  const ask = (secret: string, input: string, extra: Record<string, unknown> = {}, user = "alice") =>
    stack.call(secret, "/api/v1/llm/responses", {
      json: { model: MODEL, input, max_output_tokens: 50, ...extra },
      user,
    });

  it("serves a key until the next call would not fit its tokens per minute, then 429 before the provider", async () => {
    const limits = { tokens: { minute: 200 } };
    const key = await stack.createKey({ limits });
    const reserve = await reservationFor("hello there", 50);
    let charged = 0;
    let admitted = 0;
    for (;;) {
      const before = stack.llm.requests.length;
      const res = await ask(key.secret, "hello there");
      if (res.status === 429) {
        expect(await res.json()).toEqual({ error: "Rate limit exceeded" });
        expect(stack.llm.requests.length).toBe(before); // the provider never saw it
        expect(Number(res.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
        expect(res.headers.get("x-ratelimit-limit-tokens")).toBe("200");
        expect(res.headers.get("x-ratelimit-remaining-tokens")).toBe(String(200 - charged));
        expect(res.headers.get("x-ratelimit-reset-tokens")).toMatch(/^\d+(ms|s)$|^\d+m\d+s$/);
        expect(charged + reserve).toBeGreaterThan(200); // it really would not have fitted
        break;
      }
      expect(res.status).toBe(200);
      expect(charged + reserve).toBeLessThanOrEqual(200);
      const body = await res.json();
      charged += body.usage.total_tokens;
      admitted++;
      // The answer's headers show the window after the reservation (the provider's usage replaces it next).
      expect(res.headers.get("x-ratelimit-limit-tokens")).toBe("200");
      expect(stack.llm.requests.at(-1)!.body.max_tokens).toBe(50);
    }
    expect(admitted).toBeGreaterThan(1);
    // After reconciliation, the window holds exactly what the provider reported.
    expect(await used(key.id, limits)).toEqual({ "key:tokens:minute": charged });
  });

  it("refuses a call larger than a whole window with no Retry-After: waiting would never let it in", async () => {
    const key = await stack.createKey({ limits: { tokens: { minute: 200 } } });
    const before = stack.llm.requests.length;
    const res = await ask(key.secret, "hello there", { max_output_tokens: 500 });
    expect(res.status).toBe(429);
    expect(await res.json()).toEqual({ error: "Rate limit exceeded" });
    expect(res.headers.get("retry-after")).toBeNull();
    // The window is untouched, and says so.
    expect(res.headers.get("x-ratelimit-remaining-tokens")).toBe("200");
    expect(stack.llm.requests.length).toBe(before);
  });

  it("limits each end user separately: one refused, another of the same key still served", async () => {
    const limits = { endUser: { tokens: { day: 100 } } };
    const key = await stack.createKey({ limits });
    let status = 200;
    let calls = 0;
    while (status === 200) {
      status = (await ask(key.secret, "hello there", {}, "alice")).status;
      calls++;
      expect(calls).toBeLessThan(20);
    }
    expect(status).toBe(429);
    expect((await ask(key.secret, "hello there", {}, "bob")).status).toBe(200);
    const alice = await used(key.id, limits, "alice");
    const bob = await used(key.id, limits, "bob");
    expect(alice["endUser:tokens:day"]).toBeGreaterThan(0);
    expect(bob["endUser:tokens:day"]).toBeLessThan(alice["endUser:tokens:day"]!);
  });

  it("applies the organization's end-user defaults to keys without their own", async () => {
    const key = await stack.createKey();
    await new OrgLimitsStore(stack.redis).update(key.org, { tokens: { day: 1 } });
    const res = await ask(key.secret, "hello there", {}, "carol");
    expect(res.status).toBe(429);
    expect(res.headers.get("x-ratelimit-limit-tokens")).toBe("1");
  });

  it("gives tokens and spend back when the provider fails before any output", async () => {
    const limits = { minute: 10, tokens: { minute: 10_000 }, spend: { day: 1 } };
    const key = await stack.createKey({ limits });
    stack.llm.mode = "fail";
    try {
      expect((await ask(key.secret, "hello there")).status).toBe(502);
    } finally {
      stack.llm.mode = "ok";
    }
    // The request was made (it stays counted); what was reserved for the model went back.
    expect(await used(key.id, limits)).toEqual({
      "key:requests:minute": 1,
      "key:tokens:minute": 0,
      "key:spend:day": 0,
    });
  });

  it("charges what a stream produced before it broke, as usage records it", async () => {
    const limits = { tokens: { minute: 10_000 } };
    const key = await stack.createKey({ org: `org-stream-${Date.now()}`, limits });
    stack.llm.mode = "error-midstream";
    try {
      const res = await ask(key.secret, "one two three four", { stream: true });
      expect(res.headers.get("x-ratelimit-limit-tokens")).toBe("10000"); // a stream carries them too
      expect(await res.text()).toContain("event: response.failed");
    } finally {
      stack.llm.mode = "ok";
    }
    const usage = await (await stack.call(key.secret, `/api/v1/usage?start=${today}`)).json();
    expect(usage.totals.output_tokens).toBeGreaterThan(0);
    const charged = (await used(key.id, limits))["key:tokens:minute"];
    expect(charged).toBe(usage.totals.total_tokens);
    expect(charged).toBeLessThan(await reservationFor("one two three four", 50));
  });

  it("refuses a model without a price to a key with a spend limit (403 naming it); prices the others", async () => {
    const limits = { spend: { month: 5 } };
    const key = await stack.createKey({ limits });
    const before = stack.llm.requests.length;
    const unpriced = await ask(key.secret, "hello", { model: "echo-small" });
    expect(unpriced.status).toBe(403);
    // The /api/v1/llm surface answers OpenAI's error shape, naming the model as the field at fault.
    const refusal = (await unpriced.json()).error;
    expect(refusal.message).toContain("'echo-small'");
    expect(refusal).toMatchObject({ code: "forbidden", param: "model" });
    expect(stack.llm.requests.length).toBe(before);

    const res = await ask(key.secret, "hello there");
    expect(res.status).toBe(200);
    const { usage } = await res.json();
    // 0.15 $/M input (150 nano-$ a token), 0.6 $/M output (600 nano-$ a token).
    const cost = (usage.input_tokens * 150 + usage.output_tokens * 600) / 1e9;
    expect((await used(key.id, limits))["key:spend:month"]).toBeCloseTo(cost, 12);
    const day = await (await stack.call(key.secret, `/api/v1/usage?start=${today}&group_by=end_user`)).json();
    expect(day.totals.cost_usd).toBeCloseTo(cost, 12);
    expect(day.data).toEqual([
      {
        end_user: "alice",
        requests: 1,
        input_tokens: usage.input_tokens,
        output_tokens: usage.output_tokens,
        total_tokens: usage.total_tokens,
        cost_usd: day.totals.cost_usd,
        cached_requests: 0,
      },
    ]);
  });

  it("refuses a call that would overspend, and sends the default output cap when none is named", async () => {
    // 64 output tokens at 0.6 $/M is 38,400 nano-$: over a limit of 0.00003 $ however short the prompt.
    const key = await stack.createKey({ limits: { spend: { day: 0.00003 } } });
    const before = stack.llm.requests.length;
    const refused = await stack.call(key.secret, "/api/v1/llm/responses", {
      json: { model: MODEL, input: "hi" },
      user: "alice",
    });
    expect(refused.status).toBe(429);
    expect(stack.llm.requests.length).toBe(before);

    const roomy = await stack.createKey({ limits: { spend: { day: 1 } } });
    expect(
      (await stack.call(roomy.secret, "/api/v1/llm/responses", { json: { model: MODEL, input: "hi" } }))
        .status,
    ).toBe(200);
    expect(stack.llm.requests.at(-1)!.body.max_tokens).toBe(64);
  });

  it("counts the request windows of a budgeted key once, in the same script, and sends the OpenAI headers", async () => {
    const limits = { minute: 2, tokens: { minute: 10_000 } };
    const key = await stack.createKey({ limits });
    const first = await ask(key.secret, "hello");
    expect(first.status).toBe(200);
    expect(first.headers.get("x-ratelimit-limit-requests")).toBe("2");
    expect(first.headers.get("x-ratelimit-remaining-requests")).toBe("1");
    expect(first.headers.get("ratelimit-policy")).toBe('"minute";q=2;w=60');
    expect((await ask(key.secret, "hello")).status).toBe(200);
    const third = await ask(key.secret, "hello");
    expect(third.status).toBe(429);
    expect(third.headers.get("x-ratelimit-remaining-requests")).toBe("0");
    const counts = await used(key.id, limits);
    expect(counts["key:requests:minute"]).toBe(2);
  });

  it("recognises a model call however Express would route it, counting its request once with its tokens", async () => {
    const limits = { minute: 5, tokens: { minute: 10_000 } };
    const key = await stack.createKey({ limits });
    for (const path of ["/api/v1/llm/responses/", "/api/v1/LLM/Responses"]) {
      const res = await stack.call(key.secret, path, {
        json: { model: MODEL, input: "hello there", max_output_tokens: 50 },
        user: "alice",
      });
      expect(res.status).toBe(200);
    }
    const counts = await used(key.id, limits);
    expect(counts["key:requests:minute"]).toBe(2); // each counted once, by the gateway or the service
    expect(counts["key:tokens:minute"]).toBeGreaterThan(0);
  });

  it("counts every request of a budgeted key in its request windows once, before any work: 404, 422, refused for tokens", async () => {
    const limits = { minute: 3, tokens: { minute: 500 } };
    const key = await stack.createKey({ limits });
    const before = stack.llm.requests.length;
    const missing = await ask(key.secret, "hello", { previous_response_id: "resp_nowhere" });
    expect(missing.status).toBe(404);
    const invalid = await ask(key.secret, "hello", { max_output_tokens: "many" });
    expect(invalid.status).toBe(422);
    const tooBig = await ask(key.secret, "hello ".repeat(1_000));
    expect(tooBig.status).toBe(429);
    expect(tooBig.headers.get("x-ratelimit-remaining-requests")).toBe("0");
    // Each counted once, as one request and no tokens; the fourth is refused by the request window.
    expect(await used(key.id, limits)).toEqual({ "key:requests:minute": 3, "key:tokens:minute": 0 });
    const fourth = await ask(key.secret, "hello");
    expect(fourth.status).toBe(429);
    expect(fourth.headers.get("ratelimit")).toMatch(/^"minute";r=0;t=\d+$/);
    expect(await used(key.id, limits)).toEqual({ "key:requests:minute": 3, "key:tokens:minute": 0 });
    expect(stack.llm.requests.length).toBe(before);
  });

  it("reserves an end user's budgets however the request target is written: fragment, absolute form", async () => {
    // Each call reserves its prompt and 200 output tokens, and is charged what it used: about three fit.
    // The organization's defaults for end users, as an operator sets them (the key has none of its own).
    const key = await stack.createKey();
    await new OrgLimitsStore(stack.redis).update(key.org, { tokens: { minute: 250 } });
    const limits = { endUser: { tokens: { minute: 250 } } };
    const body = JSON.stringify({ model: MODEL, input: "hello there", max_output_tokens: 200 });
    const send = (target: string) =>
      rawHttp(
        stack.gatewayUrl,
        `POST ${target} HTTP/1.1\r\nHost: gateway.test\r\nAuthorization: Bearer ${key.secret}\r\n` +
          `X-On-Behalf-Of: mallory\r\nContent-Type: application/json\r\n` +
          `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
      );
    const targets = [
      "/api/v1/llm/responses#x",
      `${stack.gatewayUrl}/api/v1/llm/responses`,
      "/api/v1/llm/responses",
    ];
    let charged = 0;
    const statuses: number[] = [];
    for (let i = 0; i < 9; i++) {
      const res = await send(targets[i % targets.length]!);
      statuses.push(res.status);
      if (res.status === 200) charged += JSON.parse(res.body).usage.total_tokens;
    }
    // Every form counts in mallory's window until it is full, then every form is refused.
    expect(statuses.slice(0, 3)).toEqual([200, 200, 200]);
    expect(statuses.slice(6)).toEqual([429, 429, 429]);
    expect((await used(key.id, limits, "mallory"))["endUser:tokens:minute"]).toBe(charged);
  });

  it("sends the requests headers on every answer of a key with request windows only", async () => {
    const key = await stack.createKey({ limits: { minute: 5 } });
    const res = await ask(key.secret, "hello");
    expect(res.status).toBe(200);
    expect(res.headers.get("x-ratelimit-limit-requests")).toBe("5");
    expect(res.headers.get("x-ratelimit-remaining-requests")).toBe("4");
    expect(res.headers.get("x-ratelimit-limit-tokens")).toBeNull();
  });

  it("counts tokens and spend reserved, refused and reconciled in the service's metrics, by unit, window and scope", async () => {
    const scrape = async () => {
      const text = await (await fetch(`${stack.serviceUrl}/metrics`)).text();
      return Object.assign(
        (series: string) => {
          const line = text.split("\n").find((l) => l.startsWith(`${series} `));
          return Number(line?.slice(series.length + 1) ?? Number.NaN);
        },
        { text },
      );
    };
    const before = await scrape();
    const key = await stack.createKey({ limits: { tokens: { hour: 200 }, spend: { month: 1 } } });
    const res = await ask(key.secret, "hello there");
    expect(res.status).toBe(200);
    const { usage } = await res.json();
    const refused = await ask(key.secret, "hello there", { max_output_tokens: 500 });
    expect(refused.status).toBe(429);
    const after = await scrape();
    const delta = (series: string) => after(series) - before(series);
    const reserved = await reservationFor("hello there", 50);
    expect(delta('service_budget_reserved_total{unit="tokens",window="hour",scope="key"}')).toBe(reserved);
    expect(
      delta('service_budget_reconciled_total{unit="tokens",window="hour",scope="key",direction="returned"}'),
    ).toBe(reserved - usage.total_tokens);
    expect(delta('service_budget_refusals_total{unit="tokens",window="hour",scope="key"}')).toBe(1);
    expect(delta('service_budget_refusals_total{unit="spend",window="month",scope="key"}')).toBe(0);
    expect(delta('service_budget_reserved_total{unit="spend",window="month",scope="key"}')).toBeGreaterThan(
      0,
    );
    expect(after.text).not.toContain(key.id);
    expect(after.text).not.toContain(key.org);
  });
});
