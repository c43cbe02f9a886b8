import { PROVIDER_SECRETS, type SseFraming, type UpstreamMode } from "@gw/test-kit/llm-upstream";
import { describe, expect, it, vi } from "vitest";
import { llmError, parseEvents, useStack } from "./stack.ts";

const stack = useStack({
  LLM_MAX_RESPONSE_BYTES: "65536",
  LLM_MAX_EVENT_CHARS: "16384",
  LLM_TIMEOUT_MS: "1000",
});

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
      expect(JSON.parse(text)).toEqual(llmError("bad_gateway", expect.stringContaining(String(status))));

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
    expect(JSON.parse(text)).toEqual(llmError("bad_gateway", expect.any(String)));
  });

  it.each([false, true])(
    "a provider 429 (stream: %s) is a 429 rate_limit_error with its Retry-After, not the key's 429",
    async (stream) => {
      const res = await withProvider("rate-limit", () => ask({ stream }));
      expect(res.status).toBe(429);
      expect(res.headers.get("retry-after")).toBe("7");
      const text = await res.text();
      expectNoProviderText(text);
      const body = JSON.parse(text);
      expect(body).toEqual(llmError("provider_rate_limited", expect.any(String)));
      expect(body.error.type).toBe("rate_limit_error");
      expect(body).not.toEqual({ error: "Rate limit exceeded" });
    },
  );

  it("a provider that stalls is cut off at LLM_TIMEOUT_MS with 504, and is not left waiting", async () => {
    const res = await withProvider("stall", () => ask());
    expect(res.status).toBe(504);
    expect(await res.json()).toEqual(llmError("gateway_timeout", expect.stringMatching(/in time/)));
    await lastRequestAborted();
  });

  /** The `response.failed` event that ends a stream, and every event before it. */
  async function failedStream(res: Response) {
    expect(res.status).toBe(200);
    const text = await res.text();
    expectNoProviderText(text);
    const events = parseEvents(text);
    expect(events.at(-1)!.type).toBe("response.failed");
    expect(events.map((e) => e.type)).not.toContain("response.completed");
    const failed = events.at(-1)!.data;
    expect(failed.sequence_number).toBe(events.length - 1);
    expect(failed.response).toMatchObject({
      status: "failed",
      error: { code: "server_error", message: expect.any(String) },
    });
    return { events, error: failed.response.error as { code: string; message: string } };
  }

  it("a stream that stalls midway ends with response.failed saying the provider did not answer in time", async () => {
    const res = await withProvider("stall-midstream", () => ask({ stream: true, input: "one two three" }));
    const { events, error } = await failedStream(res);
    expect(events.map((e) => e.type)).toContain("response.output_text.delta");
    expect(error.message).toMatch(/in time/);
  });

  it("an error chunk in the middle of a stream ends it with response.failed, without the provider's text", async () => {
    const res = await withProvider("error-midstream", () => ask({ stream: true, input: "one two three" }));
    const { events, error } = await failedStream(res);
    expect(events.map((e) => e.type)).toEqual([
      "response.created",
      "response.in_progress",
      "response.output_item.added",
      "response.content_part.added",
      "response.output_text.delta",
      "response.failed",
    ]);
    expect(error.message).toMatch(/^The model provider failed/);
    // What was streamed before the failure is in the failed response.
    expect(events.at(-1)!.data.response.output).toMatchObject([
      { type: "message", content: [{ type: "output_text", text: "Echo: " }] },
    ]);
    expect(JSON.stringify(logsOf(res))).toContain("db.internal.example");
  });

  it("a provider answer over LLM_MAX_RESPONSE_BYTES is a 502, and its connection is let go", async () => {
    const res = await withProvider("oversized", () => ask());
    expect(res.status).toBe(502);
    expect(await res.json()).toEqual(llmError("bad_gateway", expect.stringContaining("65536")));
    await lastRequestAborted();
  });

  it("a streamed event over LLM_MAX_EVENT_CHARS ends the stream with response.failed, and its connection is let go", async () => {
    const res = await withProvider("oversized", () => ask({ stream: true, input: "one two three" }));
    const { error } = await failedStream(res);
    expect(error.message).toContain("16384");
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
    expect(await res.json()).toEqual(
      llmError("service_unavailable", expect.stringContaining("LLM_BASE_URL")),
    );
  });
});
