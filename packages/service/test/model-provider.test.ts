import { describe, expect, it, vi } from "vitest";
import { useStack } from "./stack.ts";

const stack = useStack();

async function ask(body: Record<string, unknown> = {}) {
  const key = await stack.createKey();
  return stack.call(key.secret, "/api/v1/llm/responses", {
    json: { input: "hello", ...body },
    user: "alice",
  });
}

describe("model provider failures", () => {
  it("an upstream error is a 502 with a JSON body", async () => {
    stack.llm.mode = "fail";
    try {
      const res = await ask();
      expect(res.status).toBe(502);
      expect(await res.json()).toEqual({ error: "Bad Gateway", message: expect.stringContaining("500") });
    } finally {
      stack.llm.mode = "ok";
    }
  });

  it("an upstream 429 is passed on as 429 with its Retry-After", async () => {
    stack.llm.mode = "rate-limit";
    try {
      const res = await ask();
      expect(res.status).toBe(429);
      expect(res.headers.get("retry-after")).toBe("7");
      expect(await res.json()).toEqual({ error: "Rate limit exceeded" });
    } finally {
      stack.llm.mode = "ok";
    }
  });

  it("a provider that stalls is cut off at LLM_TIMEOUT_MS with 504, and is not left waiting", async () => {
    stack.llm.mode = "stall";
    try {
      const res = await ask();
      expect(res.status).toBe(504);
      expect(await res.json()).toEqual({
        error: "Gateway Timeout",
        message: expect.stringMatching(/in time/),
      });
      await vi.waitFor(() => expect(stack.llm.requests.at(-1)?.aborted).toBe(true), { timeout: 2_000 });
    } finally {
      stack.llm.mode = "ok";
    }
  });

  it("a stream that stalls midway ends with an error event", async () => {
    stack.llm.mode = "stall-midstream";
    try {
      const res = await ask({ stream: true, input: "one two three" });
      expect(res.status).toBe(200);
      const text = await res.text();
      expect(text).toContain("event: response.output_text.delta");
      expect(text).toMatch(/event: error\ndata: .*"gateway_timeout"/);
      expect(text).not.toContain("response.completed");
    } finally {
      stack.llm.mode = "ok";
    }
  });

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
