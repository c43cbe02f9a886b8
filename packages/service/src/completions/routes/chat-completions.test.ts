import { ManualClock } from "@gw/core/clock";
import { scanKeys } from "@gw/test-kit";
import { describe, expect, it } from "vitest";
import { llmError, useStack } from "../../../test/stack.ts";
import { utcDay } from "../../usage/store.ts";
import { PostgresCompletionStore } from "../store.ts";

const stack = useStack({ LLM_MODELS: "echo-small,echo-large" });
const CHAT = "/api/v1/llm/chat/completions";
const upstream = () => stack.llm.requests.at(-1)!.body;

const WEATHER = {
  type: "function",
  function: {
    name: "get_weather",
    description: "The weather in a city",
    parameters: { type: "object", properties: { text: { type: "string" } } },
  },
};

interface Chunk {
  id: string;
  object: string;
  choices: {
    delta: {
      role?: string;
      content?: string;
      tool_calls?: { index: number; id?: string; function: { name?: string; arguments: string } }[];
    };
    finish_reason: string | null;
  }[];
  usage?: unknown;
}

/** The `data:` payloads of a chat-completions stream, `[DONE]` as a string. */
function chunksOf(text: string): (Chunk | "[DONE]")[] {
  return text
    .split("\n\n")
    .filter(Boolean)
    .map((block) => {
      const data = /^data: (.*)$/m.exec(block)![1]!;
      return data === "[DONE]" ? data : JSON.parse(data);
    });
}

async function setup(input?: Parameters<typeof stack.createKey>[0]) {
  const key = await stack.createKey(input);
  const as = (user: string) => ({
    create: async (json: unknown) => {
      const res = await stack.call(key.secret, CHAT, { json, user });
      return { res, body: await res.json() };
    },
    call: (path: string, init: { method?: string; json?: unknown } = {}) =>
      stack.call(key.secret, `${CHAT}${path}`, { ...init, user }),
  });
  return { key, as };
}

describe("chat completions", () => {
  it("answers in OpenAI's shape, marked deprecated, and sends the request's fields to the provider", async () => {
    const { as } = await setup();
    const { res, body } = await as("alice").create({
      model: "echo-large",
      messages: [
        { role: "developer", content: "Be brief." },
        { role: "user", content: [{ type: "text", text: "hello there" }] },
      ],
      max_completion_tokens: 50,
      temperature: 0.5,
      reasoning_effort: "low",
      verbosity: "high",
      response_format: { type: "json_object" },
      n: 1,
    });
    expect(res.status).toBe(200);
    expect(res.headers.get("deprecation")).toMatch(/^@\d+$/);
    expect(res.headers.get("link")).toBe('</api/v1/llm/responses>; rel="successor-version"');
    expect(body).toMatchObject({
      id: expect.stringMatching(/^chatcmpl-[0-9a-f]{32}$/),
      object: "chat.completion",
      created: expect.any(Number),
      choices: [
        {
          index: 0,
          message: { role: "assistant", content: "Echo: hello there", refusal: null },
          finish_reason: "stop",
          logprobs: null,
        },
      ],
      usage: { prompt_tokens: expect.any(Number), completion_tokens: 3, total_tokens: expect.any(Number) },
    });
    expect(upstream()).toMatchObject({
      model: "echo-large",
      messages: [
        { role: "developer", content: "Be brief." },
        { role: "user", content: "hello there" },
      ],
      max_tokens: 50,
      temperature: 0.5,
      reasoning_effort: "low",
      verbosity: "high",
      response_format: { type: "json_object" },
    });
    // Not stored unless asked: nothing to read back.
    expect((await as("alice").call(`/${body.id}`)).status).toBe(404);
  });

  it("round-trips tool calls: the model's calls come back as tool_calls, their outputs as tool messages", async () => {
    const { as } = await setup();
    const first = await as("alice").create({
      messages: [{ role: "user", content: "Paris" }],
      tools: [WEATHER],
    });
    const message = first.body.choices[0].message;
    expect(first.body.choices[0].finish_reason).toBe("tool_calls");
    expect(message).toMatchObject({
      content: null,
      tool_calls: [{ id: expect.any(String), type: "function", function: { name: "get_weather" } }],
    });
    const call = message.tool_calls[0];
    const second = await as("alice").create({
      messages: [
        { role: "user", content: "Paris" },
        message,
        { role: "tool", tool_call_id: call.id, content: "sunny" },
      ],
      tools: [WEATHER],
    });
    expect(second.body.choices[0].message.content).toBe("Echo: sunny");
    expect(upstream().messages).toEqual([
      { role: "user", content: "Paris" },
      { role: "assistant", content: null, tool_calls: [call] },
      { role: "tool", tool_call_id: call.id, content: "sunny" },
    ]);
  });

  it("streams chunks, then the usage chunk when include_usage asks for it, then [DONE]", async () => {
    const { as } = await setup();
    const res = await as("alice").call("", {
      json: {
        messages: [{ role: "user", content: "one two" }],
        stream: true,
        stream_options: { include_usage: true },
      },
    });
    expect(res.headers.get("content-type")).toMatch(/^text\/event-stream/);
    expect(res.headers.get("deprecation")).toMatch(/^@\d+$/);
    const chunks = chunksOf(await res.text()) as Chunk[];
    expect(chunks.at(-1)).toBe("[DONE]");
    const usage = chunks.at(-2)!;
    expect(usage).toMatchObject({
      object: "chat.completion.chunk",
      choices: [],
      usage: { completion_tokens: 3 },
    });
    const deltas = chunks.slice(0, -2);
    expect(deltas[0]!.choices[0]!.delta).toEqual({ role: "assistant", content: "", refusal: null });
    expect(deltas.map((c) => c.choices[0]!.delta.content ?? "").join("")).toBe("Echo: one two");
    expect(deltas.at(-1)!.choices[0]!.finish_reason).toBe("stop");
    expect(new Set(deltas.map((c) => c.id)).size).toBe(1);
    expect(deltas.every((c) => c.usage === null)).toBe(true);

    const without = await as("alice").call("", {
      json: { messages: [{ role: "user", content: "x" }], stream: true },
    });
    const plain = chunksOf(await without.text()) as Chunk[];
    expect(plain.some((c) => typeof c === "object" && "usage" in c)).toBe(false);
  });

  it("streams a tool call: id, type and name first, then argument fragments", async () => {
    const { as } = await setup();
    const res = await as("alice").call("", {
      json: { messages: [{ role: "user", content: "Oslo" }], tools: [WEATHER], stream: true },
    });
    const chunks = (chunksOf(await res.text()) as Chunk[]).slice(0, -1);
    const calls = chunks.flatMap((c) => c.choices[0]!.delta.tool_calls ?? []);
    expect(calls[0]).toMatchObject({
      index: 0,
      id: expect.any(String),
      type: "function",
      function: { name: "get_weather" },
    });
    expect(calls.slice(1).every((c) => !("id" in c))).toBe(true);
    expect(JSON.parse(calls.map((c) => c.function.arguments).join(""))).toEqual({
      text: "Oslo",
    });
    expect(chunks.at(-1)!.choices[0]!.finish_reason).toBe("tool_calls");
  });

  it("a stream the provider breaks ends with an OpenAI error chunk, without the provider's text", async () => {
    const { as } = await setup();
    stack.llm.mode = "error-midstream";
    try {
      const res = await as("alice").call("", {
        json: { messages: [{ role: "user", content: "a b c" }], stream: true },
      });
      const text = await res.text();
      const chunks = chunksOf(text);
      expect(chunks).not.toContain("[DONE]");
      expect(chunks.at(-1)).toEqual(
        llmError("bad_gateway", expect.stringMatching(/^The model provider failed/)),
      );
      expect(text).not.toContain("db.internal.example");
    } finally {
      stack.llm.mode = "ok";
    }
  });

  it("records usage as responses do", async () => {
    const { key, as } = await setup();
    await as("alice").create({ messages: [{ role: "user", content: "one two three" }] });
    const res = await as("alice").call("", {
      json: { messages: [{ role: "user", content: "four" }], stream: true },
    });
    await res.text();
    const today = utcDay(new Date());
    const usage = await (await stack.call(key.secret, `/api/v1/usage?start=${today}&group_by=user`)).json();
    expect(usage.totals).toMatchObject({ requests: 2, output_tokens: 4 + 2 });
    expect(usage.data).toMatchObject([{ user: "alice", requests: 2 }]);
  });

  it.each([
    [{ stop: ["a", "b", "c", "d", "e"] }, ["body", "stop"]],
    [
      { messages: [{ role: "assistant", content: "x", function_call: { name: "f", arguments: "{}" } }] },
      ["body", "messages", 0, "function_call"],
    ],
    [{ functions: [] }, ["body", "functions"]],
    [{ messages: [{ role: "function", name: "f", content: "x" }] }, ["body", "messages", 0, "role"]],
    [
      {
        messages: [{ role: "user", content: [{ type: "image_url", image_url: { url: "https://x.test" } }] }],
      },
      ["body", "messages", 0, "content", 0, "type"],
    ],
    [{ tools: [{ type: "custom", custom: { name: "x" } }] }, ["body", "tools", 0, "type"]],
    [{ model: "gpt-unknown" }, ["body", "model"]],
    // Billed above the catalogue's prices: not priced wrong, refused.
    [{ service_tier: "priority" }, ["body", "service_tier"]],
    [{ service_tier: "scale" }, ["body", "service_tier"]],
  ])("refuses %j with a 422 at %j before the model is asked", async (fields, loc) => {
    const { as } = await setup();
    const before = stack.llm.requests.length;
    const { res, body } = await as("alice").create({ messages: [{ role: "user", content: "x" }], ...fields });
    expect(res.status).toBe(422);
    expect(body.detail[0].loc).toEqual(loc);
    expect(stack.llm.requests.length).toBe(before);
  });

  it("forwards seed, stop, prompt_cache_key, safety_identifier and service_tier", async () => {
    const { as } = await setup();
    const { res } = await as("alice").create({
      messages: [{ role: "user", content: "x" }],
      seed: 42,
      stop: "\n",
      prompt_cache_key: "thread-9",
      safety_identifier: "user-hash-1",
      service_tier: "default",
    });
    expect(res.status).toBe(200);
    expect(upstream()).toMatchObject({
      seed: 42,
      stop: ["\n"],
      prompt_cache_key: "thread-9",
      safety_identifier: "user-hash-1",
      service_tier: "default",
    });
    await as("alice").create({ messages: [{ role: "user", content: "x" }], stop: ["a", "b"] });
    expect(upstream().stop).toEqual(["a", "b"]);
  });

  it("sends text given in several parts on in those parts, and keeps them with the stored messages", async () => {
    const { as } = await setup();
    const parts = [
      { type: "text", text: "Rule one." },
      { type: "text", text: "Rule two." },
    ];
    const { res, body } = await as("alice").create({
      store: true,
      messages: [
        { role: "system", content: parts },
        { role: "user", content: [{ type: "text", text: "q" }] },
      ],
    });
    expect(res.status).toBe(200);
    // As given, not run together ("Rule one.Rule two."); one part stays plain text.
    expect(upstream().messages).toEqual([
      { role: "system", content: parts },
      { role: "user", content: "q" },
    ]);
    const stored = await (await as("alice").call(`/${body.id}/messages`)).json();
    expect(
      stored.data.map((m: { content: string; content_parts: unknown }) => [m.content, m.content_parts]),
    ).toEqual([
      ["Rule one.Rule two.", parts],
      ["q", [{ type: "text", text: "q" }]],
    ]);
  });

  it("echoes the service_tier asked for, in the answer and in every chunk of a stream (null when none)", async () => {
    const { as } = await setup();
    const asked = await as("alice").create({
      messages: [{ role: "user", content: "x" }],
      service_tier: "flex",
    });
    expect(asked.body.service_tier).toBe("flex");
    const none = await as("alice").create({ messages: [{ role: "user", content: "x" }] });
    expect(none.body.service_tier).toBeNull();
    const res = await as("alice").call("", {
      json: { messages: [{ role: "user", content: "x" }], service_tier: "flex", stream: true },
    });
    const chunks = (chunksOf(await res.text()) as (Chunk & { service_tier: unknown })[]).slice(0, -1);
    expect(chunks.length).toBeGreaterThan(1);
    expect(chunks.every((c) => c.service_tier === "flex")).toBe(true);
  });

  it("takes LangChain's tool loop (name on the tool message) and openai-python's model_dump() of an answer", async () => {
    const { as } = await setup();
    const tools = [WEATHER];
    const first = await as("alice").create({ messages: [{ role: "user", content: "Paris" }], tools });
    const answer = first.body.choices[0].message;
    // What `resp.choices[0].message.model_dump()` sends back: every field, null where absent.
    const dumped = {
      audio: null,
      function_call: null,
      refusal: null,
      annotations: [],
      ...answer,
      name: null,
    };
    const call = answer.tool_calls[0];
    const { res, body } = await as("alice").create({
      tools,
      messages: [
        { role: "user", content: "Paris", name: "alice" },
        dumped,
        { role: "tool", tool_call_id: call.id, content: "sunny", name: "get_weather" },
      ],
    });
    expect(res.status).toBe(200);
    expect(body.choices[0].message.content).toBe("Echo: sunny");
    expect(upstream().messages).toEqual([
      { role: "user", content: "Paris" },
      { role: "assistant", content: null, tool_calls: [call] },
      { role: "tool", tool_call_id: call.id, content: "sunny" },
    ]);
    const refused = await as("alice").create({
      messages: [
        { role: "user", content: "x" },
        { role: "assistant", content: null, refusal: "I can't." },
      ],
    });
    expect(refused.res.status).toBe(200);
    expect(upstream().messages[1]).toEqual({ role: "assistant", content: "I can't." });
  });

  it("a 422 carries OpenAI's error object beside the contract's detail", async () => {
    const { as } = await setup();
    const { res, body } = await as("alice").create({
      messages: [
        { role: "user", content: "x" },
        { role: "tool", tool_call_id: "c", content: "y", colour: 1 },
      ],
      n: 0,
    });
    expect(res.status).toBe(422);
    expect(body.detail).toHaveLength(2);
    expect(body.error).toEqual({
      message: `Invalid '${body.detail[0].loc.slice(1).join(".")}': ${body.detail[0].msg} (and 1 more: see detail)`,
      type: "invalid_request_error",
      param: body.detail[0].loc.slice(1).join("."),
      code: body.detail[0].type,
    });
    expect(body.error.param).toMatch(/^(messages\.1\.colour|n)$/);
  });

  it("a model outside the key's allowlist is 403 naming it", async () => {
    const { as } = await setup({ models: ["echo-large"] });
    const { res, body } = await as("alice").create({
      model: "echo-small",
      messages: [{ role: "user", content: "x" }],
    });
    expect(res.status).toBe(403);
    expect(body).toEqual(llmError("forbidden", "This API key may not use the model 'echo-small'", "model"));
  });
});

describe("stored chat completions", () => {
  it("are completion resources: 404 to others until granted reader, then readable and not writable", async () => {
    const { key, as } = await setup();
    const { body: created } = await as("alice").create({
      messages: [
        { role: "system", content: "Be brief." },
        { role: "user", content: "hello" },
      ],
      store: true,
      metadata: { topic: "greeting" },
    });
    expect(created.metadata).toEqual({ topic: "greeting" });
    const owned = await stack.call(
      key.secret,
      `/api/v1/authorization/llm/check?resourceType=completion&resourceId=${created.id}&role=owner`,
      { user: "alice" },
    );
    expect(await owned.json()).toEqual({ allowed: true });

    const bob = as("bob");
    for (const [method, path, json] of [
      ["GET", "", undefined],
      ["GET", "/messages", undefined],
      ["POST", "", { metadata: { x: "y" } }],
      ["DELETE", "", undefined],
    ] as const) {
      const res = await bob.call(`/${created.id}${path}`, { method, json });
      expect(res.status, `${method} ${path}`).toBe(404);
      expect(await res.json()).toEqual(llmError("not_found", `No completion ${created.id}`));
    }
    const listed = await bob.call("");
    expect(listed.status, await listed.clone().text()).toBe(200);
    expect((await listed.json()).data).toEqual([]);

    const grant = await stack.call(key.secret, "/api/v1/authorization/llm/grant", {
      json: { resourceType: "completion", resourceId: created.id, userId: "bob", role: "reader" },
      user: "alice",
    });
    expect(grant.status).toBe(204);
    expect(await (await bob.call(`/${created.id}`)).json()).toEqual(created);
    const messages = await (await bob.call(`/${created.id}/messages`)).json();
    expect(messages).toMatchObject({
      object: "list",
      data: [
        { id: `${created.id}-0`, role: "system", content: "Be brief." },
        { id: `${created.id}-1`, role: "user", content: "hello" },
      ],
      has_more: false,
    });
    expect((await (await bob.call("")).json()).data.map((c: { id: string }) => c.id)).toEqual([created.id]);
    for (const [method, json] of [
      ["POST", { metadata: { x: "y" } }],
      ["DELETE", undefined],
    ] as const) {
      const res = await bob.call(`/${created.id}`, { method, json });
      expect(res.status).toBe(403);
      expect((await res.json()).error.code).toBe("forbidden");
    }
    expect((await (await as("alice").call(`/${created.id}`)).json()).metadata).toEqual({ topic: "greeting" });
  });

  it("are listed for the principal only, filtered by model and metadata, paged by id; updated and deleted by writers", async () => {
    const { as } = await setup();
    const alice = as("alice");
    const ids: string[] = [];
    for (const [model, team] of [
      ["echo-small", "red"],
      ["echo-large", "red"],
      ["echo-small", "blue"],
    ]) {
      const { body } = await alice.create({
        model,
        messages: [{ role: "user", content: "x" }],
        store: true,
        metadata: { team },
      });
      ids.push(body.id);
    }
    await alice.create({ messages: [{ role: "user", content: "not kept" }] });
    await as("carol").create({ messages: [{ role: "user", content: "carol's" }], store: true });
    const list = async (query: string) =>
      (await (await alice.call(query)).json()) as { data: { id: string }[]; has_more: boolean };
    expect(new Set((await list("")).data.map((c) => c.id))).toEqual(new Set(ids));
    expect((await list("?model=echo-small")).data.map((c) => c.id).sort()).toEqual([ids[0], ids[2]].sort());
    expect((await list("?metadata[team]=red")).data.map((c) => c.id).sort()).toEqual([ids[0], ids[1]].sort());
    const first = await list("?limit=2");
    expect(first.data).toHaveLength(2);
    expect(first.has_more).toBe(true);
    const rest = await list(`?limit=2&after=${first.data[1]!.id}`);
    expect([...first.data, ...rest.data].map((c) => c.id).sort()).toEqual([...ids].sort());
    expect(rest.has_more).toBe(false);

    const updated = await alice.call(`/${ids[0]}`, { method: "POST", json: { metadata: { team: "green" } } });
    expect((await updated.json()).metadata).toEqual({ team: "green" });
    const deleted = await alice.call(`/${ids[0]}`, { method: "DELETE" });
    expect(await deleted.json()).toEqual({ id: ids[0], object: "chat.completion.deleted", deleted: true });
    expect((await alice.call(`/${ids[0]}`)).status).toBe(404);
    expect((await list("")).data.map((c) => c.id)).not.toContain(ids[0]);
  });
  it("live in PostgreSQL, not Redis: one row with its messages, changed in place, and none once deleted", async () => {
    const { key, as } = await setup();
    const alice = as("alice");
    const { body: created } = await alice.create({
      messages: [
        { role: "system", content: "Be brief." },
        { role: "user", content: "hello" },
      ],
      store: true,
    });
    const row = async () =>
      (
        await stack.db.query<{ body: { metadata: Record<string, string> }; messages: { content: string }[] }>(
          "SELECT body, messages FROM chat_completions WHERE org = $1 AND id = $2",
          [key.org, created.id],
        )
      ).rows;
    expect(await row()).toEqual([
      {
        body: created,
        messages: [
          expect.objectContaining({ id: `${created.id}-0`, content: "Be brief." }),
          expect.objectContaining({ id: `${created.id}-1`, content: "hello" }),
        ],
      },
    ]);
    expect(await scanKeys(stack.redis, "gw:chatcmpl*")).toEqual([]);
    await alice.call(`/${created.id}`, { method: "POST", json: { metadata: { k: "v" } } });
    expect((await row())[0]!.body.metadata).toEqual({ k: "v" });
    expect((await alice.call(`/${created.id}`, { method: "DELETE" })).status).toBe(200);
    expect(await row()).toEqual([]);
    expect((await alice.call(`/${created.id}/messages`)).status).toBe(404);
  });

  it("the store reads only its organization's completions, and only those not yet expired", async () => {
    const clock = new ManualClock(0, Date.parse("2026-01-01T00:00:00Z"));
    const store = new PostgresCompletionStore(stack.db, { clock, retentionMs: 60_000 });
    const completion = (id: string, metadata: Record<string, string> = {}) =>
      ({ id, object: "chat.completion", created: 0, model: "m", choices: [], metadata }) as never;
    const message = (id: string) => ({ id, role: "user", content: id, content_parts: null }) as const;
    const [org, other] = [`org-store-${clock.wall()}-a`, `org-store-${clock.wall()}-b`];
    await store.save(org, completion("chatcmpl-old"), [message("m0")]);
    clock.advance(30_000);
    await store.save(org, completion("chatcmpl-new"), [message("m1"), message("m2")]);
    await store.save(other, completion("chatcmpl-theirs"), []);

    const ids = ["chatcmpl-old", "chatcmpl-new", "chatcmpl-theirs", "chatcmpl-none"];
    expect((await store.getMany(org, ids)).map((c) => c.id).sort()).toEqual(["chatcmpl-new", "chatcmpl-old"]);
    expect(await store.get(org, "chatcmpl-theirs")).toBeUndefined();
    expect(await store.messages(other, "chatcmpl-new")).toBeUndefined();
    expect((await store.messages(org, "chatcmpl-new"))?.map((m) => m.id)).toEqual(["m1", "m2"]);

    clock.advance(30_001); // chatcmpl-old is past its 60 s
    expect((await store.getMany(org, ids)).map((c) => c.id)).toEqual(["chatcmpl-new"]);
    expect(await store.get(org, "chatcmpl-old")).toBeUndefined();
    expect(await store.messages(org, "chatcmpl-old")).toBeUndefined();
    expect(await store.replace(org, completion("chatcmpl-old", { k: "v" }))).toBe(false);
    expect(await store.replace(org, completion("chatcmpl-new", { k: "v" }))).toBe(true);
    expect(await store.replace(other, completion("chatcmpl-new", { k: "x" }))).toBe(false);
    expect((await store.get(org, "chatcmpl-new"))?.metadata).toEqual({ k: "v" });
    await store.delete(org, "chatcmpl-new");
    expect(await store.get(org, "chatcmpl-new")).toBeUndefined();
    expect(await store.get(other, "chatcmpl-theirs")).toBeDefined();
  });
});
