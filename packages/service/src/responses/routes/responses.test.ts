import { describe, expect, it } from "vitest";
import { parseEvents as events, useStack } from "../../../test/stack.ts";

// A held model stream (the pass-through test) must not time out while the test reads it.
const stack = useStack({ LLM_TIMEOUT_MS: "30000" });
const RESPONSES = "/api/v1/llm/responses";

describe("responses", () => {
  it("answers with a completed response object of the contract's shape, owned by the end user", async () => {
    const key = await stack.createKey();
    const res = await stack.call(key.secret, RESPONSES, {
      json: { model: "auto", input: "hi", stream: false },
      user: "alice",
    });
    expect(res.status).toBe(200);
    const body = await res.json();
    expect(body).toMatchObject({
      id: expect.stringMatching(/^resp_[0-9a-f]{32}$/),
      object: "response",
      status: "completed",
      model: "echo-small-2026-01-01",
      created_at: expect.any(Number),
      output: [
        {
          type: "message",
          role: "assistant",
          status: "completed",
          content: [{ type: "output_text", text: "Echo: hi", annotations: [] }],
        },
      ],
      usage: { input_tokens: 4, output_tokens: 2, total_tokens: 6 },
    });
    const upstream = stack.llm.requests.at(-1)!;
    expect(upstream.body).toMatchObject({ model: "echo-small", messages: [{ role: "user", content: "hi" }] });
    expect(upstream.authorization).toBe("Bearer upstream-secret");

    // Another end user of the org cannot read it until the owner grants reader.
    const path = `${RESPONSES}/${body.id}`;
    expect((await stack.call(key.secret, path, { user: "bob" })).status).toBe(404);
    expect((await stack.call(key.secret, path, { user: "alice" })).status).toBe(200);
    const grant = await stack.call(key.secret, "/api/v1/authorization/llm/grant", {
      json: { resourceType: "response", resourceId: body.id, userId: "bob", role: "reader" },
      user: "alice",
    });
    expect(grant.status).toBe(204);
    const read = await stack.call(key.secret, path, { user: "bob" });
    expect(read.status).toBe(200);
    expect(await read.json()).toEqual(body);
  });

  it("streams the Responses events in order, and the streamed response is stored", async () => {
    const key = await stack.createKey();
    const res = await stack.call(key.secret, RESPONSES, {
      json: { model: "auto", input: "one two three", stream: true },
      user: "alice",
    });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toMatch(/^text\/event-stream/);
    const list = events(await res.text());
    const deltas = list.filter((e) => e.type === "response.output_text.delta");
    expect(deltas.length).toBeGreaterThan(1);
    expect(list.map((e) => e.type)).toEqual([
      "response.created",
      "response.in_progress",
      "response.output_item.added",
      "response.content_part.added",
      ...deltas.map(() => "response.output_text.delta"),
      "response.output_text.done",
      "response.content_part.done",
      "response.output_item.done",
      "response.completed",
    ]);
    expect(deltas.map((e) => e.data.delta).join("")).toBe("Echo: one two three");
    expect(list.map((e) => e.data.sequence_number)).toEqual(list.map((_, i) => i));
    expect(list[0]!.data.response).toMatchObject({ status: "in_progress", output: [] });
    expect(list[0]!.data.response).not.toHaveProperty("usage");
    const completed = list.at(-1)!.data.response;
    expect(completed).toMatchObject({
      status: "completed",
      output: [
        {
          type: "message",
          status: "completed",
          content: [{ type: "output_text", text: "Echo: one two three" }],
        },
      ],
      usage: { output_tokens: 4 },
    });
    const item = completed.output[0];
    const at = { item_id: item.id, output_index: 0 };
    expect(list[2]!.data).toMatchObject({
      output_index: 0,
      item: { id: item.id, type: "message", status: "in_progress", role: "assistant", content: [] },
    });
    expect(list[3]!.data).toMatchObject({ ...at, content_index: 0, part: { type: "output_text", text: "" } });
    expect(deltas[0]!.data).toMatchObject({ ...at, content_index: 0 });
    expect(list.at(-4)!.data).toMatchObject({ ...at, content_index: 0, text: "Echo: one two three" });
    expect(list.at(-3)!.data).toMatchObject({
      ...at,
      part: { type: "output_text", text: "Echo: one two three" },
    });
    expect(list.at(-2)!.data).toEqual({
      type: "response.output_item.done",
      sequence_number: list.length - 2,
      output_index: 0,
      item,
    });
    const stored = await stack.call(key.secret, `${RESPONSES}/${completed.id}`, { user: "alice" });
    expect(await stored.json()).toEqual(completed);
  });

  it("passes streamed events through the gateway as they come, not at the end", async () => {
    // The model sends its first word, then holds the rest until the test has read that word.
    stack.llm.mode = "hold-midstream";
    try {
      const key = await stack.createKey();
      const res = await stack.call(key.secret, RESPONSES, {
        json: { input: "a b c d e f", stream: true },
        user: "alice",
      });
      const reader = res.body!.getReader();
      let early = "";
      while (!early.includes("response.output_text.delta")) {
        const { value, done } = await reader.read();
        if (done) throw new Error(`the stream ended before its first delta: ${early}`);
        early += new TextDecoder().decode(value);
      }
      expect(early).toContain("response.created");
      expect(early).not.toContain("response.completed");
      stack.llm.release();
      let rest = "";
      for (let r = await reader.read(); !r.done; r = await reader.read())
        rest += new TextDecoder().decode(r.value);
      expect(rest).toContain("response.completed");
    } finally {
      stack.llm.release();
    }
  });

  it("sends a conversation's earlier items as context and appends the new turn", async () => {
    const key = await stack.createKey();
    const conversation = await (
      await stack.call(key.secret, "/api/v1/llm/conversations", { json: {}, user: "alice" })
    ).json();
    const ask = (input: string) =>
      stack.call(key.secret, RESPONSES, {
        json: { input, conversation: conversation.id, instructions: "Be brief." },
        user: "alice",
      });
    expect((await ask("first question")).status).toBe(200);
    expect((await ask("second question")).status).toBe(200);
    expect(stack.llm.requests.at(-1)!.body.messages).toEqual([
      { role: "system", content: "Be brief." },
      { role: "user", content: "first question" },
      { role: "assistant", content: "Echo: first question" },
      { role: "user", content: "second question" },
    ]);
    const items = await (
      await stack.call(key.secret, `/api/v1/llm/conversations/${conversation.id}/items?order=asc`, {
        user: "alice",
      })
    ).json();
    expect(
      items.data.map(
        (i: { role: string; content: { text: string }[] }) => `${i.role}: ${i.content[0]!.text}`,
      ),
    ).toEqual([
      "user: first question",
      "assistant: Echo: first question",
      "user: second question",
      "assistant: Echo: second question",
    ]);
  });

  it("needs writer on the conversation it continues", async () => {
    const key = await stack.createKey();
    const conversation = await (
      await stack.call(key.secret, "/api/v1/llm/conversations", { json: {}, user: "alice" })
    ).json();
    await stack.call(key.secret, "/api/v1/authorization/llm/grant", {
      json: { resourceType: "conversation", resourceId: conversation.id, userId: "rita", role: "reader" },
      user: "alice",
    });
    const before = stack.llm.requests.length;
    const asReader = await stack.call(key.secret, RESPONSES, {
      json: { input: "x", conversation: conversation.id },
      user: "rita",
    });
    expect(asReader.status).toBe(403);
    const asStranger = await stack.call(key.secret, RESPONSES, {
      json: { input: "x", conversation: conversation.id },
      user: "sam",
    });
    expect(asStranger.status).toBe(404);
    expect(stack.llm.requests.length).toBe(before);
  });

  it("accepts input as a list of messages", async () => {
    const key = await stack.createKey();
    const res = await stack.call(key.secret, RESPONSES, {
      json: {
        input: [
          { role: "developer", content: "Answer in English." },
          { role: "user", content: [{ type: "input_text", text: "hello" }] },
        ],
        max_output_tokens: 50,
      },
      user: "alice",
    });
    expect(res.status).toBe(200);
    expect(stack.llm.requests.at(-1)!.body).toMatchObject({
      max_tokens: 50,
      messages: [
        { role: "developer", content: "Answer in English." },
        { role: "user", content: "hello" },
      ],
    });
  });

  it.each([
    [{}, ["body", "input"], "missing"],
    [{ input: "" }, ["body", "input"], undefined],
    [{ input: "x", stream: "yes" }, ["body", "stream"], "bool_type"],
    [{ input: "x", max_output_tokens: 0 }, ["body", "max_output_tokens"], "greater_than_equal"],
    [{ input: "x", conversation: "chat_1" }, ["body", "conversation"], "string_pattern_mismatch"],
    [{ input: "x", temperature: 2.5 }, ["body", "temperature"], "less_than_equal"],
    [{ input: "x", temperature: "hot" }, ["body", "temperature"], "float_type"],
    [{ input: "x", top_p: -0.1 }, ["body", "top_p"], "greater_than_equal"],
    [{ input: "x", colour: "blue" }, ["body", "colour"], "extra_forbidden"],
    [{ input: "x", truncation: "sometimes" }, ["body", "truncation"], "enum"],
    [
      { input: [{ role: "user", content: [{ type: "input_text", text: 1 }] }] },
      ["body", "input", 0, "content", 0, "text"],
      "string_type",
    ],
    [{ input: [{ type: "function_call_output", output: "x" }] }, ["body", "input", 0, "call_id"], "missing"],
    [
      { input: "x", tools: [{ type: "function", name: "has space" }] },
      ["body", "tools", 0, "name"],
      "string_pattern_mismatch",
    ],
    [
      { input: "x", tool_choice: { type: "function", name: "absent" } },
      ["body", "tool_choice", "name"],
      "value_error",
    ],
    [
      { input: "x", conversation: "conv_1", previous_response_id: "resp_1" },
      ["body", "previous_response_id"],
      "value_error",
    ],
  ])("validates %j → 422 at %j", async (body, loc, type) => {
    const key = await stack.createKey();
    const res = await stack.call(key.secret, RESPONSES, { json: body, user: "alice" });
    expect(res.status).toBe(422);
    const { detail } = await res.json();
    expect(detail).toEqual(
      expect.arrayContaining([expect.objectContaining({ loc, ...(type ? { type } : {}) })]),
    );
  });

  it("needs responses:write", async () => {
    const key = await stack.createKey({ permissions: ["responses:read"] });
    const res = await stack.call(key.secret, RESPONSES, { json: { input: "x" }, user: "alice" });
    expect(res.status).toBe(403);
  });
});
