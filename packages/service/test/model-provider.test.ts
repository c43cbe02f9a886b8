import { PROVIDER_SECRETS, type SseFraming, type UpstreamMode } from "@gw/e2e/llm-upstream";
import { describe, expect, it, vi } from "vitest";
import { parseEvents, useStack } from "./stack.ts";

const stack = useStack({ LLM_MAX_RESPONSE_BYTES: "65536", LLM_MAX_EVENT_CHARS: "16384" });

async function ask(body: Record<string, unknown> = {}) {
  const key = await stack.createKey();
  return stack.call(key.secret, "/api/v1/llm/responses", {
    json: { input: "hello", ...body },
    user: "alice",
  });
}

/** Runs `fn` with the test provider switched to `mode` (and `framing`), and back afterwards. */
async function withProvider<T>(
  mode: UpstreamMode,
  fn: () => Promise<T>,
  options: { failStatus?: number; framing?: SseFraming } = {},
): Promise<T> {
  stack.llm.mode = mode;
  stack.llm.failStatus = options.failStatus ?? 500;
  stack.llm.framing = options.framing ?? "lf";
  try {
    return await fn();
  } finally {
    stack.llm.mode = "ok";
    stack.llm.failStatus = 500;
    stack.llm.framing = "lf";
  }
}

/** Nothing the provider said reaches the client: not its secrets, not its words. */
function expectNoProviderText(text: string) {
  for (const secret of [PROVIDER_SECRETS.password, PROVIDER_SECRETS.apiKey, "db.internal", "postgres:"])
    expect(text).not.toContain(secret);
  expect(text).not.toMatch(/connection to|slow down|<html/);
}

/** The service's log lines about one request. */
const logsOf = (res: Response) =>
  stack.serviceLogs.filter((line) => line.requestId === res.headers.get("x-request-id"));

const lastRequestAborted = () =>
  vi.waitFor(() => expect(stack.llm.requests.at(-1)?.aborted).toBe(true), { timeout: 2_000 });

describe("model provider failures", () => {
  it.each([
    [500, false],
    [401, false],
    [500, true],
    [401, true],
  ])(
    "a provider %i (stream: %s) is a generic 502; its body goes to the log only, redacted",
    async (status, stream) => {
      const res = await withProvider("fail", () => ask({ stream }), { failStatus: status });
      expect(res.status).toBe(502);
      expect(res.headers.get("content-type")).toMatch(/^application\/json/);
      const text = await res.text();
      expectNoProviderText(text);
      expect(JSON.parse(text)).toEqual({
        error: "Bad Gateway",
        message: expect.stringContaining(String(status)),
      });

      const logged = JSON.stringify(logsOf(res));
      expect(logged).toContain("db.internal.example"); // enough to find the cause
      expect(logged).toContain("[redacted]");
      expect(logged).not.toContain(PROVIDER_SECRETS.password);
      expect(logged).not.toContain(PROVIDER_SECRETS.apiKey);
    },
  );

  it.each([false, true])("a provider 200 that is not JSON (stream: %s) is a 502", async (stream) => {
    const res = await withProvider("not-json", () => ask({ stream }));
    expect(res.status).toBe(502);
    const text = await res.text();
    expectNoProviderText(text);
    expect(JSON.parse(text)).toEqual({ error: "Bad Gateway", message: expect.any(String) });
  });

  it.each([false, true])(
    "a provider 429 (stream: %s) is a 503 with its Retry-After, not the key's 429",
    async (stream) => {
      const res = await withProvider("rate-limit", () => ask({ stream }));
      expect(res.status).toBe(503);
      expect(res.headers.get("retry-after")).toBe("7");
      const text = await res.text();
      expectNoProviderText(text);
      expect(JSON.parse(text)).toEqual({ error: "Service Unavailable", message: expect.any(String) });
    },
  );

  it("a provider that stalls is cut off at LLM_TIMEOUT_MS with 504, and is not left waiting", async () => {
    const res = await withProvider("stall", () => ask());
    expect(res.status).toBe(504);
    expect(await res.json()).toEqual({
      error: "Gateway Timeout",
      message: expect.stringMatching(/in time/),
    });
    await lastRequestAborted();
  });

  it("a stream that stalls midway ends with an error event", async () => {
    const res = await withProvider("stall-midstream", () => ask({ stream: true, input: "one two three" }));
    expect(res.status).toBe(200);
    const text = await res.text();
    expect(text).toContain("event: response.output_text.delta");
    expect(text).toMatch(/event: error\ndata: .*"gateway_timeout"/);
    expect(text).not.toContain("response.completed");
  });

  it("an error chunk in the middle of a stream ends it with an error event, without the provider's text", async () => {
    const res = await withProvider("error-midstream", () => ask({ stream: true, input: "one two three" }));
    expect(res.status).toBe(200);
    const text = await res.text();
    expectNoProviderText(text);
    const events = parseEvents(text);
    expect(events.map((e) => e.type)).toEqual(["response.created", "response.output_text.delta", "error"]);
    expect(events.at(-1)!.data).toEqual({
      type: "error",
      sequence_number: 2,
      code: "bad_gateway",
      message: expect.any(String),
    });
    expect(JSON.stringify(logsOf(res))).toContain("db.internal.example");
  });

  it("a provider answer over LLM_MAX_RESPONSE_BYTES is a 502, and its connection is let go", async () => {
    const res = await withProvider("oversized", () => ask());
    expect(res.status).toBe(502);
    expect(await res.json()).toEqual({ error: "Bad Gateway", message: expect.stringContaining("65536") });
    await lastRequestAborted();
  });

  it("a streamed event over LLM_MAX_EVENT_CHARS ends the stream with an error event, and its connection is let go", async () => {
    const res = await withProvider("oversized", () => ask({ stream: true, input: "one two three" }));
    expect(res.status).toBe(200);
    const events = parseEvents(await res.text());
    expect(events.at(-1)).toMatchObject({
      type: "error",
      data: { code: "bad_gateway", message: expect.stringContaining("16384") },
    });
    expect(events.map((e) => e.type)).not.toContain("response.completed");
    await lastRequestAborted();
  });

  it.each(["lf", "crlf", "multiline", "unterminated"] as const)(
    "reads streamed events framed %s: the whole text and the provider's usage",
    async (framing) => {
      const res = await withProvider("ok", () => ask({ stream: true, input: "one two three" }), { framing });
      const events = parseEvents(await res.text());
      expect(events.at(-1)!.type).toBe("response.completed");
      expect(events.at(-1)!.data.response).toMatchObject({
        output: [{ content: [{ text: "Echo: one two three" }] }],
        // The provider's own counts (its usage is its last event), not the estimate.
        usage: { input_tokens: 6, output_tokens: 4, total_tokens: 10 },
      });
    },
  );

  it("a client that disconnects aborts the provider call", async () => {
    stack.llm.chunkDelayMs = 200;
    try {
      const key = await stack.createKey();
      const controller = new AbortController();
      const started = await fetch(`${stack.gatewayUrl}/api/v1/llm/responses`, {
        method: "POST",
        headers: {
          authorization: `Bearer ${key.secret}`,
          "x-on-behalf-of": "alice",
          "content-type": "application/json",
        },
        body: JSON.stringify({ input: "k l m n o p q r s t", stream: true }),
        signal: controller.signal,
      });
      const reader = started.body!.getReader();
      await reader.read(); // the stream has begun
      controller.abort();
      await vi.waitFor(
        () => {
          const upstream = stack.llm.requests.find(
            (r) => r.body.messages.at(-1)?.content === "k l m n o p q r s t",
          );
          expect(upstream?.aborted).toBe(true);
        },
        { timeout: 2_000 },
      );
    } finally {
      stack.llm.chunkDelayMs = 5;
    }
  });
});

describe("no provider configured", () => {
  const bare = useStack({ LLM_BASE_URL: "" });

  it("answers 503 naming the variable to set, and creates nothing", async () => {
    const key = await bare.createKey();
    const res = await bare.call(key.secret, "/api/v1/llm/responses", {
      json: { model: "auto", input: "hi" },
      user: "alice",
    });
    expect(res.status).toBe(503);
    expect(await res.json()).toEqual({
      error: "Service Unavailable",
      message: expect.stringContaining("LLM_BASE_URL"),
    });
  });
});
