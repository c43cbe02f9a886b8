import { describe, expect, it } from "vitest";
import { llmError, useStack } from "../../test/stack.ts";

// The catalogue of `pnpm start`'s development provider: `echo` chats, `text-embedding-3-small` embeds.
const stack = useStack({ LLM_MODELS: "echo,text-embedding-3-small", LLM_DEVELOPMENT_PROVIDER: "true" });

describe("a model the catalogue says is for chat or for embeddings", () => {
  it("is refused, 400 at model, by the calls it is not for, before the provider is asked", async () => {
    const key = await stack.createKey();
    const before = stack.llm.requests.length;
    const embeddingOnly = llmError(
      "bad_request",
      "The model 'text-embedding-3-small' makes embeddings only: call /embeddings with it",
      "model",
    );
    for (const [path, json] of [
      ["/api/v1/llm/responses", { model: "text-embedding-3-small", input: "hi" }],
      [
        "/api/v1/llm/chat/completions",
        { model: "text-embedding-3-small", messages: [{ role: "user", content: "hi" }] },
      ],
      [
        "/api/v1/llm/evals/schedules",
        { name: "e", model: "text-embedding-3-small", inputs: ["hi"], every_seconds: 3600 },
      ],
    ] as const) {
      const res = await stack.call(key.secret, path, { json, user: "alice" });
      expect(res.status, path).toBe(400);
      expect(await res.json(), path).toEqual(embeddingOnly);
    }
    const chat = await stack.call(key.secret, "/api/v1/llm/embeddings", {
      json: { model: "echo", input: "hi" },
      user: "alice",
    });
    expect(chat.status).toBe(400);
    expect(await chat.json()).toEqual(
      llmError("bad_request", "The model 'echo' cannot make embeddings: it is a chat model", "model"),
    );
    expect(stack.llm.requests.length).toBe(before);
  });

  it("is taken by the calls it is for", async () => {
    const key = await stack.createKey();
    const answered = await stack.call(key.secret, "/api/v1/llm/responses", {
      json: { model: "echo", input: "hi" },
      user: "alice",
    });
    expect(answered.status).toBe(200);
    const embedded = await stack.call(key.secret, "/api/v1/llm/embeddings", {
      json: { model: "text-embedding-3-small", input: "hi" },
      user: "alice",
    });
    expect(embedded.status).toBe(200);
    expect((await embedded.json()).data).toHaveLength(1);
  });
});
