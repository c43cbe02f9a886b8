import { OPENAI_OPENAPI, openaiSchemaProblems } from "@gw/test-kit/openai-schemas";
import { describe, expect, it } from "vitest";
import { parseEvents, useStack } from "./stack.ts";

/**
 * Every object and stream event the gateway produces on the OpenAI-compatible
 * surface validates against OpenAI's official schemas (the OpenAPI document
 * vendored in the test kit): responses and their events, conversations and
 * items, chat completions and chunks, stored completions, models, errors.
 */
const stack = useStack({ LLM_MODELS: "echo-small,echo-large" });
const LLM = "/api/v1/llm";

const WEATHER = {
  type: "function",
  name: "get_weather",
  description: "The weather in a city",
  parameters: { type: "object", properties: { text: { type: "string" } }, required: ["text"] },
  strict: false,
};

async function client() {
  const { secret } = await stack.createKey();
  const call = async (path: string, init: { method?: string; json?: unknown } = {}) => {
    const res = await stack.call(secret, `${LLM}${path}`, { ...init, user: "alice" });
    const text = await res.text();
    return { status: res.status, text, body: text.startsWith("{") ? JSON.parse(text) : undefined };
  };
  return call;
}

/** Asserts `value` is a valid `schema`, showing what is not when it is not. */
function valid(schema: string, value: unknown): void {
  expect({ schema, problems: openaiSchemaProblems(schema, value) }).toEqual({ schema, problems: [] });
}

/** The `data:` payloads of a chat-completions stream, without `[DONE]`. */
const chunksOf = (text: string) =>
  text
    .split("\n\n")
    .filter(Boolean)
    .map((block) => /^data: (.*)$/m.exec(block)![1]!)
    .filter((data) => data !== "[DONE]")
    .map((data) => JSON.parse(data));

describe(`objects against OpenAI's schemas (openai-openapi ${OPENAI_OPENAPI.version})`, () => {
  it("the validator refuses what OpenAI's types refuse", () => {
    const usage = { input_tokens: 1, input_tokens_details: { cached_tokens: 0 } };
    expect(
      openaiSchemaProblems("ResponseUsage", { ...usage, output_tokens: 1, total_tokens: 2 }),
    ).not.toEqual([]);
    expect(
      openaiSchemaProblems("ResponseFunctionCallArgumentsDoneEvent", {
        type: "response.function_call_arguments.done",
        item_id: "fc_1",
        output_index: 0,
        arguments: "{}",
        sequence_number: 3,
      }),
    ).toEqual([expect.stringContaining("'name'")]);
  });

  it("responses: JSON, retrieved, with tools, chained, incomplete, their input items and token counts", async () => {
    const call = await client();
    const plain = await call("/responses", { json: { input: "hello", metadata: { a: "b" } } });
    expect(plain.status).toBe(200);
    valid("Response", plain.body);
    valid("Response", (await call(`/responses/${plain.body.id}`)).body);
    const tools = await call("/responses", { json: { input: "Paris", tools: [WEATHER], max_tool_calls: 3 } });
    valid("Response", tools.body);
    const fc = tools.body.output[0];
    const chained = await call("/responses", {
      json: {
        previous_response_id: tools.body.id,
        input: [{ type: "function_call_output", call_id: fc.call_id, output: "sunny" }],
        include: ["message.output_text.logprobs"],
        top_logprobs: 1,
      },
    });
    valid("Response", chained.body);
    expect(chained.body.output[0].content[0].logprobs).not.toEqual([]);
    const cut = await call("/responses", { json: { input: "one two three four", max_output_tokens: 1 } });
    expect(cut.body.status).toBe("incomplete");
    valid("Response", cut.body);
    valid("ResponseItemList", (await call(`/responses/${chained.body.id}/input_items`)).body);
    valid("TokenCountsResource", (await call("/responses/input_tokens", { json: { input: "hello" } })).body);
  });

  it("responses: every stream event, with text, tool calls, obfuscation, and a failure midway", async () => {
    const call = await client();
    const events = async (json: Record<string, unknown>) => {
      const res = await call("/responses", { json: { ...json, stream: true } });
      expect(res.status).toBe(200);
      return parseEvents(res.text).map((e) => {
        expect(e.data.type).toBe(e.type);
        return e.data;
      });
    };
    const all = [
      ...(await events({ input: "one two three", stream_options: { include_obfuscation: true } })),
      ...(await events({ input: "Paris", tools: [WEATHER] })),
      ...(await events({ input: "one two three four", max_output_tokens: 1 })),
    ];
    stack.llm.mode = "error-midstream";
    try {
      all.push(...(await events({ input: "one two three" })));
    } finally {
      stack.llm.mode = "ok";
    }
    const types = new Set(all.map((e) => e.type));
    for (const type of [
      "response.created",
      "response.in_progress",
      "response.output_item.added",
      "response.content_part.added",
      "response.output_text.delta",
      "response.output_text.done",
      "response.content_part.done",
      "response.function_call_arguments.delta",
      "response.function_call_arguments.done",
      "response.output_item.done",
      "response.completed",
      "response.incomplete",
      "response.failed",
    ])
      expect(types).toContain(type);
    for (const event of all) valid("ResponseStreamEvent", event);
    const failed = all.find((e) => e.type === "response.failed");
    expect(failed.response.output[0].status).toBe("incomplete");
    expect(failed.response.usage).toMatchObject({ output_tokens: expect.any(Number) });
    // One model name everywhere: the provider's, from response.created on.
    const created = all.find((e) => e.type === "response.created");
    const completed = all.find((e) => e.type === "response.completed");
    expect(created.response.model).toBe("echo-small-2026-01-01");
    expect(completed.response.model).toBe(created.response.model);
  });

  it("conversations and their items", async () => {
    const call = await client();
    const created = await call("/conversations", {
      json: {
        metadata: { topic: "x" },
        items: [
          { role: "user", content: "Hi" },
          { type: "message", role: "assistant", content: [{ type: "output_text", text: "Hello" }] },
        ],
      },
    });
    valid("ConversationResource", created.body);
    const id = created.body.id;
    valid("ConversationResource", (await call(`/conversations/${id}`)).body);
    valid(
      "ConversationResource",
      (await call(`/conversations/${id}`, { json: { metadata: { a: "b" } } })).body,
    );
    const added = await call(`/conversations/${id}/items`, {
      json: {
        items: [{ type: "message", role: "assistant", content: [{ type: "output_text", text: "More" }] }],
      },
    });
    valid("ConversationItemList", added.body);
    await call("/responses", { json: { conversation: id, input: "Paris", tools: [WEATHER] } });
    const list = await call(`/conversations/${id}/items`);
    valid("ConversationItemList", list.body);
    for (const item of list.body.data) {
      valid("ConversationItem", item);
      valid("ConversationItem", (await call(`/conversations/${id}/items/${item.id}`)).body);
    }
    valid(
      "ConversationResource",
      (await call(`/conversations/${id}/items/${list.body.data[0].id}`, { method: "DELETE" })).body,
    );
    valid("DeletedConversationResource", (await call(`/conversations/${id}`, { method: "DELETE" })).body);
  });

  it("chat completions, their chunks, and stored completions", async () => {
    const call = await client();
    const messages = [
      { role: "system", content: "Be brief." },
      { role: "user", content: "Paris" },
    ];
    const plain = await call("/chat/completions", { json: { messages, store: true, metadata: { a: "b" } } });
    valid("CreateChatCompletionResponse", plain.body);
    const tools = await call("/chat/completions", {
      json: { messages, tools: [{ type: "function", function: { name: "get_weather", parameters: {} } }] },
    });
    valid("CreateChatCompletionResponse", tools.body);
    for (const json of [
      { messages, stream: true, stream_options: { include_usage: true, include_obfuscation: true } },
      { messages, stream: true, tools: [{ type: "function", function: { name: "get_weather" } }] },
    ]) {
      const res = await call("/chat/completions", { json });
      const chunks = chunksOf(res.text);
      expect(chunks.length).toBeGreaterThan(2);
      for (const chunk of chunks) {
        valid("CreateChatCompletionStreamResponse", chunk);
        expect(chunk.model).toBe("echo-small-2026-01-01");
      }
    }
    const id = plain.body.id;
    valid("CreateChatCompletionResponse", (await call(`/chat/completions/${id}`)).body);
    valid(
      "CreateChatCompletionResponse",
      (await call(`/chat/completions/${id}`, { json: { metadata: { c: "d" } } })).body,
    );
    valid("ChatCompletionList", (await call("/chat/completions")).body);
    // OpenAI's document types every listed message as an assistant's, though its API lists the others too.
    const listed = (await call(`/chat/completions/${id}/messages`)).body;
    expect(listed.data.map((m: { role: string }) => m.role)).toEqual(["system", "user"]);
    valid("ChatCompletionMessageList", {
      ...listed,
      data: listed.data.map((m: Record<string, unknown>) => ({ ...m, role: "assistant" })),
    });
    valid("ChatCompletionDeleted", (await call(`/chat/completions/${id}`, { method: "DELETE" })).body);
  });

  it("models and errors", async () => {
    const call = await client();
    const list = await call("/models");
    valid("ListModelsResponse", list.body);
    valid("Model", (await call(`/models/${list.body.data[0].id}`)).body);
    for (const error of [
      await call("/responses/resp_unknown"),
      await call("/responses", { json: { input: "x", colour: "red" } }),
      await call("/chat/completions", { json: { messages: [] } }),
    ]) {
      expect(error.status).toBeGreaterThanOrEqual(400);
      valid("ErrorResponse", error.body);
    }
  });
});
