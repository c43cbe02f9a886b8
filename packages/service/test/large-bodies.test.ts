import { turnsTaken } from "@gw/core/turns";
import { describe, expect, it } from "vitest";
import { useStack } from "./stack.ts";

/**
 * Work that grows with a request's body and cannot be cut into pieces runs
 * in turns of its own (`@gw/core/turns`): parsing a large body, serialising
 * a large request for the provider. Small requests take no turn.
 */
describe("large bodies", () => {
  const stack = useStack();
  const CHAT = "/api/v1/llm/chat/completions";

  it("a large chat completion's body is parsed, and its provider request serialised, in turns of their own", async () => {
    const key = await stack.createKey();
    const content = "word ".repeat(60_000);
    const before = turnsTaken();
    const res = await stack.call(key.secret, CHAT, {
      json: { model: "gpt-4o", max_tokens: 5, messages: [{ role: "user", content }] },
    });
    expect(res.status).toBe(200);
    await res.json();
    expect(turnsTaken() - before).toBe(2);
    // The provider got the request whole.
    expect(stack.llm.requests.at(-1)!.body.messages).toEqual([{ role: "user", content }]);
  });

  it("a stored response's large input is kept whole, serialised for PostgreSQL in a turn of its own", async () => {
    const key = await stack.createKey();
    const input = "word ".repeat(60_000);
    const before = turnsTaken();
    const res = await stack.call(key.secret, "/api/v1/llm/responses", {
      json: { model: "gpt-4o", max_output_tokens: 16, input },
    });
    expect(res.status).toBe(200);
    const { id } = await res.json();
    // The body, the provider request, the stored input.
    expect(turnsTaken() - before).toBe(3);
    const items = await (await stack.call(key.secret, `/api/v1/llm/responses/${id}/input_items`)).json();
    expect(items.data[0].content[0].text).toBe(input);
  });

  it("a small one takes no turn", async () => {
    const key = await stack.createKey();
    const before = turnsTaken();
    const res = await stack.call(key.secret, CHAT, {
      json: { model: "gpt-4o", messages: [{ role: "user", content: "hello" }] },
    });
    expect(res.status).toBe(200);
    expect(turnsTaken() - before).toBe(0);
  });
});
