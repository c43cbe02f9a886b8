import { describe, expect, it } from "vitest";
import { useStack } from "./stack.ts";

const stack = useStack();
const RESPONSES = "/api/v1/llm/responses";
const CONV = "/api/v1/llm/conversations";

/** Text PostgreSQL will not turn into `text` from JSON: U+0000, and lone surrogates of either kind. */
const TEXTS = [
  "nul\u0000inside",
  "lone high \ud800 surrogate",
  "lone low \udc00 surrogate",
  "\\u0000 as written",
];

describe.each(TEXTS)("text %j", (text) => {
  it("is stored in a response and a conversation, listed back as sent, and an item_reference to it works", async () => {
    const key = await stack.createKey();
    const created = await stack.call(key.secret, RESPONSES, { json: { input: text }, user: "alice" });
    expect(created.status).toBe(200);
    const response = await created.json();
    const items = await stack.call(key.secret, `${RESPONSES}/${response.id}/input_items`, { user: "alice" });
    expect(items.status).toBe(200);
    const [stored] = (await items.json()).data;
    expect(stored.content[0].text).toBe(text);

    const conversation = await stack.call(key.secret, CONV, {
      json: { items: [{ role: "user", content: text }] },
      user: "alice",
    });
    expect(conversation.status).toBe(200);
    const conversationId = (await conversation.json()).id as string;
    const listed = await stack.call(key.secret, `${CONV}/${conversationId}/items`, { user: "alice" });
    const [kept] = (await listed.json()).data;
    expect(kept.content[0].text).toBe(text);

    for (const id of [stored.id, kept.id]) {
      const asked = stack.llm.requests.length;
      const referenced = await stack.call(key.secret, RESPONSES, {
        json: { input: [{ type: "item_reference", id }] },
        user: "alice",
      });
      expect(referenced.status, id).toBe(200);
      expect(stack.llm.requests[asked]!.body.messages.at(-1)!.content).toBe(text);
      // Someone who may not read it gets the 404 of an unknown item, not a 500.
      const stranger = await stack.call(key.secret, RESPONSES, {
        json: { input: [{ type: "item_reference", id }] },
        user: "mallory",
      });
      expect(stranger.status, id).toBe(404);
    }
  });
});
