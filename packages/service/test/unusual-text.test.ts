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

/**
 * Ids too long for SpiceDB once scoped and encoded (`fitsObjectId`: 1,024
 * bytes; an emoji is 12 characters encoded) name nothing that can exist:
 * every route that takes one answers as for an unknown id (404), never a 500
 * from SpiceDB refusing the call. 80 emoji still fit, and are merely unknown.
 */
describe("an id too long for SpiceDB once encoded", () => {
  it.each([
    ["100 emoji", "😀".repeat(100)],
    ["85 emoji (1,020 characters encoded, past the limit with the organization)", "😀".repeat(85)],
    ["80 emoji (fits)", "😀".repeat(80)],
    ["250 '=' (750 characters encoded: fits)", "=".repeat(250)],
  ])("%s: 404 wherever a conversation, response or completion is named", async (_what, id) => {
    const key = await stack.createKey();
    const as = (path: string, init: { method?: string; json?: unknown } = {}) =>
      stack.call(key.secret, path, { ...init, user: "alice" });
    const encoded = encodeURIComponent(id);
    const requests: [string, { method?: string; json?: unknown }][] = [
      [`${CONV}/${encoded}`, {}],
      [`${CONV}/${encoded}`, { method: "DELETE" }],
      [`${CONV}/${encoded}`, { json: { metadata: { a: "b" } } }],
      [`${CONV}/${encoded}/items`, {}],
      [`${CONV}/${encoded}/items`, { json: { items: [{ role: "user", content: "hi" }] } }],
      [`${CONV}/${encoded}/items/msg_1`, {}],
      [`${CONV}/${encoded}/items/msg_1`, { method: "DELETE" }],
      [`${RESPONSES}/${encoded}`, {}],
      [`${RESPONSES}/${encoded}`, { method: "DELETE" }],
      [`${RESPONSES}/${encoded}/cancel`, { method: "POST" }],
      [`${RESPONSES}/${encoded}/input_items`, {}],
      [`/api/v1/llm/chat/completions/${encoded}`, {}],
      [`/api/v1/llm/chat/completions/${encoded}`, { method: "DELETE" }],
      [`/api/v1/llm/chat/completions/${encoded}`, { json: { metadata: { a: "b" } } }],
      [`/api/v1/llm/chat/completions/${encoded}/messages`, {}],
      [RESPONSES, { json: { input: "probe", previous_response_id: id } }],
      [`${RESPONSES}/input_tokens`, { json: { input: "probe", previous_response_id: id } }],
    ];
    for (const [path, init] of requests) {
      const res = await as(path, init);
      expect(res.status, `${init.method ?? (init.json ? "POST" : "GET")} ${path.slice(0, 60)}`).toBe(404);
      expect((await res.json()).error.code).toBe("not_found");
    }
    expect(stack.llm.requests.filter((r) => r.body.messages.some((m) => m.content === "probe"))).toEqual([]);
  });
});

/**
 * A model name is a name: U+0000 or a lone surrogate in one is refused where
 * it is given (422 at `model`), before a model is called. A lone surrogate
 * once reached the provider and then failed usage accounting (500).
 */
describe("a model name holding U+0000 or a lone surrogate", () => {
  it.each([
    ["U+0000", "echo\u0000small"],
    ["a lone high surrogate", "echo\ud800"],
    ["a lone low surrogate", "\udc00"],
  ])(
    "%s: 422 at model for responses, chat completions, token counts and eval schedules",
    async (_what, model) => {
      const key = await stack.createKey();
      for (const [path, json] of [
        [RESPONSES, { model, input: "model-probe" }],
        [`${RESPONSES}/input_tokens`, { model, input: "model-probe" }],
        ["/api/v1/llm/chat/completions", { model, messages: [{ role: "user", content: "model-probe" }] }],
        ["/api/v1/llm/evals/schedules", { model, name: "n", inputs: ["model-probe"], every_seconds: 3600 }],
      ] as const) {
        const res = await stack.call(key.secret, path, { json, user: "alice" });
        expect(res.status, path).toBe(422);
        expect((await res.json()).detail, path).toEqual([
          expect.objectContaining({
            loc: ["body", "model"],
            msg: "String should contain neither U+0000 nor a lone surrogate",
          }),
        ]);
      }
      expect(
        stack.llm.requests.filter((r) => r.body.messages.some((m) => m.content === "model-probe")),
      ).toEqual([]);
    },
  );
});
