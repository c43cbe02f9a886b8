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

/**
 * An id holding U+0000 names nothing the service keeps (PostgreSQL's text
 * cannot hold it, and no issued id does): every place that looks one up
 * answers as for an unknown id, never a 500 from PostgreSQL refusing the
 * parameter (and before any model call).
 */
describe("an id holding U+0000", () => {
  it("is an unknown id wherever one is looked up", async () => {
    const key = await stack.createKey();
    const as = (path: string, init: { method?: string; json?: unknown } = {}) =>
      stack.call(key.secret, path, { ...init, user: "alice" });
    const conversation = await as(CONV, { json: { items: [{ role: "user", content: "hi" }] } });
    expect(conversation.status).toBe(200);
    const conversationId = (await conversation.json()).id as string;
    const schedule = await as("/api/v1/llm/evals/schedules", {
      json: { name: "nul", inputs: ["hi"], every_seconds: 3600 },
    });
    expect(schedule.status).toBe(200);
    const scheduleId = (await schedule.json()).id as string;

    const previous = await as(RESPONSES, { json: { input: "probe", previous_response_id: "resp_\u0000" } });
    expect(previous.status).toBe(404);
    expect((await previous.json()).error.message).toBe("No response resp_\u0000");
    const referenced = await as(RESPONSES, {
      json: {
        input: [
          { type: "item_reference", id: "msg_\u0000" },
          { role: "user", content: "probe" },
        ],
      },
    });
    expect(referenced.status).toBe(404);
    expect((await referenced.json()).error.message).toBe("No item msg_\u0000");
    const counted = await as(`${RESPONSES}/input_tokens`, {
      json: { input: "probe", previous_response_id: "resp_\u0000" },
    });
    expect(counted.status).toBe(404);
    // (the schedule's first run may have called the model meanwhile, with its own input)
    expect(stack.llm.requests.filter((r) => r.body.messages.some((m) => m.content === "probe"))).toEqual([]);

    expect((await as(`${CONV}/${conversationId}/items/msg_%00`)).status).toBe(404);
    expect((await as(`${CONV}/${conversationId}/items/msg_%00`, { method: "DELETE" })).status).toBe(404);
    for (const path of [
      `${CONV}/${conversationId}/items?after=msg_%00`,
      "/api/v1/llm/evals/schedules?after=eval_sched_%00",
      `/api/v1/llm/evals/schedules/${scheduleId}/runs?after=eval_run_%00`,
    ]) {
      const listed = await as(path);
      expect(listed.status, path).toBe(422);
      expect((await listed.json()).detail[0].loc, path).toEqual(["query", "after"]);
    }
  });
});
