import { describe, expect, it } from "vitest";
import { llmError, useStack } from "../../../test/stack.ts";
import { countPromptTokens, countTokens } from "../../llm/tokens.ts";

const stack = useStack();
const RESPONSES = "/api/v1/llm/responses";
const COUNT = `${RESPONSES}/input_tokens`;

describe("responses/input_tokens", () => {
  it("counts with the model's tokenizer, and never calls the model", async () => {
    const key = await stack.createKey();
    const before = stack.llm.requests.length;
    const res = await stack.call(key.secret, COUNT, { json: { model: "gpt-4o", input: "hello there" } });
    expect(res.status).toBe(200);
    // o200k_base: "hello there" is 2 tokens, plus 3 + 1 for the message and 3 for the reply's priming.
    expect(await res.json()).toEqual({ object: "response.input_tokens", input_tokens: 9 });
    expect(stack.llm.requests.length).toBe(before);
  });

  it("counts exactly what a response with the same body sends: instructions, earlier context, tools", async () => {
    const key = await stack.createKey();
    const first = await (
      await stack.call(key.secret, RESPONSES, { json: { input: "my secret plan" }, user: "alice" })
    ).json();
    const body = {
      model: "gpt-4o",
      instructions: "Be brief.",
      previous_response_id: first.id,
      input: "and then?",
      tools: [{ type: "function", name: "get_weather", parameters: { type: "object" } }],
    };
    const counted = await (await stack.call(key.secret, COUNT, { json: body, user: "alice" })).json();
    await stack.call(key.secret, RESPONSES, { json: body, user: "alice" });
    const sent = stack.llm.requests.at(-1)!.body;
    expect(sent.messages).toHaveLength(4);
    const messages = sent.messages.map((m) => ({ role: m.role as "user", content: m.content ?? "" }));
    // Everything else the model reads is counted as the JSON sent (the tools' definitions here).
    const { model: _model, messages: _messages, ...rest } = sent;
    expect(Object.keys(rest)).toContain("tools");
    expect(counted.input_tokens).toBe(
      (await countPromptTokens({ model: "gpt-4o", messages })) +
        (await countTokens("gpt-4o", JSON.stringify(rest))),
    );
    expect(counted.input_tokens).toBeGreaterThan(9);
  });

  it("is 404 for a previous response or item the caller may not read, as creating would be", async () => {
    const key = await stack.createKey();
    const first = await (
      await stack.call(key.secret, RESPONSES, { json: { input: "mine" }, user: "alice" })
    ).json();
    const chained = await stack.call(key.secret, COUNT, {
      json: { previous_response_id: first.id, input: "x" },
      user: "bob",
    });
    expect(chained.status).toBe(404);
    expect(await chained.json()).toEqual(llmError("not_found", `No response ${first.id}`));
    const referenced = await stack.call(key.secret, COUNT, {
      json: { input: [{ type: "item_reference", id: first.output[0].id }] },
      user: "bob",
    });
    expect(referenced.status).toBe(404);
  });

  it("needs responses:read", async () => {
    const key = await stack.createKey({ permissions: ["conversations:read"] });
    expect((await stack.call(key.secret, COUNT, { json: { input: "x" } })).status).toBe(403);
  });
});
