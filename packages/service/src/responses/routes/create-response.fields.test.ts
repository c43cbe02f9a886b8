import { describe, expect, it } from "vitest";
import { llmError, parseEvents, useStack } from "../../../test/stack.ts";

const stack = useStack({ LLM_CONTEXT_MAX_ITEMS: "4" });
const RESPONSES = "/api/v1/llm/responses";

const WEATHER = {
  type: "function",
  name: "get_weather",
  description: "The weather in a city",
  parameters: { type: "object", properties: { text: { type: "string" } } },
  strict: true,
};
const TIME = { type: "function", name: "get_time", parameters: null, strict: null, description: null };

async function create(body: Record<string, unknown>, user = "alice", secret?: string) {
  const key = secret ?? (await stack.createKey()).secret;
  const res = await stack.call(key, RESPONSES, { json: body, user });
  return { res, body: await res.json(), secret: key };
}

const upstream = () => stack.llm.requests.at(-1)!.body;

describe("request fields", () => {
  it("forwards temperature, top_p, user, text format and verbosity, and echoes them", async () => {
    const { res, body } = await create({
      input: "hi",
      temperature: 0.7,
      top_p: 0.5,
      user: "customer-42",
      text: { format: { type: "json_object" }, verbosity: "low" },
      metadata: { run: "7" },
    });
    expect(res.status).toBe(200);
    expect(upstream()).toMatchObject({
      temperature: 0.7,
      top_p: 0.5,
      user: "customer-42",
      response_format: { type: "json_object" },
      verbosity: "low",
    });
    expect(body).toMatchObject({
      temperature: 0.7,
      top_p: 0.5,
      user: "customer-42",
      text: { format: { type: "json_object" }, verbosity: "low" },
      metadata: { run: "7" },
      store: true,
      truncation: "auto",
      parallel_tool_calls: true,
      tool_choice: "auto",
      tools: [],
      background: false,
      error: null,
      incomplete_details: null,
      previous_response_id: null,
      completed_at: expect.any(Number),
      usage: {
        input_tokens: expect.any(Number),
        input_tokens_details: { cached_tokens: 0, cache_write_tokens: 0 },
        output_tokens: 2,
        output_tokens_details: { reasoning_tokens: 0 },
      },
    });
  });

  it("sends nothing the caller did not ask for", async () => {
    await create({ input: "hi" });
    expect(Object.keys(upstream()).sort()).toEqual(["messages", "model"]);
  });

  it("takes null as absent for every optional field", async () => {
    const nulls = Object.fromEntries(
      [
        "model",
        "stream",
        "instructions",
        "conversation",
        "previous_response_id",
        "max_output_tokens",
        "metadata",
        "temperature",
        "top_p",
        "user",
        "store",
        "text",
        "tools",
        "tool_choice",
        "parallel_tool_calls",
        "truncation",
        "background",
        "reasoning",
        "include",
        "max_tool_calls",
        "prompt",
        "prompt_cache_key",
        "safety_identifier",
        "service_tier",
        "stream_options",
        "top_logprobs",
      ].map((field) => [field, null]),
    );
    const { res, body } = await create({ input: "hi", ...nulls, text: { format: null, verbosity: null } });
    expect(res.status).toBe(200);
    expect(body).toMatchObject({ status: "completed", model: "echo-small-2026-01-01", store: true });
    expect(Object.keys(upstream()).sort()).toEqual(["messages", "model"]);
  });

  it("forwards reasoning.effort as reasoning_effort and text.verbosity as verbosity, and echoes them", async () => {
    const { res, body } = await create({
      input: "hi",
      reasoning: { effort: "minimal", summary: null },
      text: { verbosity: "low" },
    });
    expect(res.status).toBe(200);
    expect(upstream()).toMatchObject({ reasoning_effort: "minimal", verbosity: "low" });
    expect(body).toMatchObject({
      reasoning: { effort: "minimal", summary: null },
      text: { verbosity: "low" },
    });
    const bad = await create({ input: "hi", reasoning: { effort: "extreme" } });
    expect(bad.res.status).toBe(422);
    expect(bad.body.detail[0]).toMatchObject({ loc: ["body", "reasoning", "effort"], type: "enum" });
  });

  it.each([
    [{ reasoning: { effort: "low", mode: "pro" } }, ["body", "reasoning", "mode"], /reasoning.mode is not/],
    [{ prompt_cache_retention: "24h" }, ["body", "prompt_cache_retention"], /prompt_cache_retention is not/],
    [{ prompt: { id: "pmpt_1" } }, ["body", "prompt"], /prompt \(stored prompt templates\) is not supported/],
    [
      { tools: [{ type: "web_search" }] },
      ["body", "tools", 0, "type"],
      /Tool type 'web_search' is not supported/,
    ],
    [
      { tools: [WEATHER, { type: "code_interpreter" }] },
      ["body", "tools", 1, "type"],
      /'code_interpreter' is not/,
    ],
    [
      {
        tools: [
          {
            type: "file_search",
            vector_store_ids: ["vs_1"],
            ranking_options: { ranker: "default-2024-11-15" },
          },
        ],
      },
      ["body", "tools", 0, "ranking_options", "ranker"],
      /OpenAI's re-ranker\) is not supported/,
    ],
    [
      {
        tools: [
          { type: "file_search", vector_store_ids: ["vs_1"], filters: { type: "near", key: "a", value: 1 } },
        ],
      },
      ["body", "tools", 0, "filters"],
      /unknown filter type 'near'/,
    ],
    [
      // A type it does not know, without a key: the type is what is wrong.
      { tools: [{ type: "file_search", vector_store_ids: ["vs_1"], filters: { type: "zz" } }] },
      ["body", "tools", 0, "filters"],
      /unknown filter type 'zz'/,
    ],
    [{ tool_choice: { type: "web_search_preview" } }, ["body", "tool_choice", "type"], /not supported/],
    [{ text: { format: { type: "grammar" } } }, ["body", "text", "format", "type"], /not supported/],
    [
      { input: [{ role: "user", content: [{ type: "input_image", image_url: "https://x.test/a.png" }] }] },
      ["body", "input", 0, "content", 0, "type"],
      /Content type 'input_image' is not supported/,
    ],
    [
      { input: [{ type: "reasoning", id: "rs_1", summary: [] }] },
      ["body", "input", 0, "type"],
      /not supported/,
    ],
  ])("refuses %j with a 422 naming the field, before the model is asked", async (fields, loc, msg) => {
    const before = stack.llm.requests.length;
    const { res, body } = await create({ input: "hi", ...fields });
    expect(res.status).toBe(422);
    expect(body.detail).toEqual([
      expect.objectContaining({ loc, type: "value_error", msg: expect.stringMatching(msg) }),
    ]);
    expect(stack.llm.requests.length).toBe(before);
  });

  it("forwards prompt_cache_key, safety_identifier and service_tier, takes what frameworks set by default, and echoes them", async () => {
    const { res, body } = await create({
      input: "hi",
      prompt_cache_key: "thread-9",
      safety_identifier: "user-hash-1",
      service_tier: "auto",
      stream_options: { include_obfuscation: false },
      include: ["reasoning.encrypted_content", "file_search_call.results"],
      reasoning: { effort: "low", summary: "auto" },
    });
    expect(res.status).toBe(200);
    expect(upstream()).toMatchObject({
      prompt_cache_key: "thread-9",
      safety_identifier: "user-hash-1",
      service_tier: "auto",
      reasoning_effort: "low",
    });
    expect(upstream()).not.toHaveProperty("logprobs");
    expect(body).toMatchObject({
      prompt_cache_key: "thread-9",
      safety_identifier: "user-hash-1",
      service_tier: "auto",
      reasoning: { effort: "low", summary: "auto" },
    });
    const bad = await create({ input: "hi", include: ["everything"] });
    expect(bad.res.status).toBe(422);
    expect(bad.body.detail[0]).toMatchObject({ loc: ["body", "include", 0], type: "enum" });
  });

  it.each(["priority", "scale"])(
    "refuses service_tier %s, which costs more than the catalogue's prices, with a 422 at service_tier before the model is asked",
    async (tier) => {
      const before = stack.llm.requests.length;
      const { res, body } = await create({ input: "hi", service_tier: tier });
      expect(res.status).toBe(422);
      expect(body.detail).toEqual([
        expect.objectContaining({ loc: ["body", "service_tier"], type: "enum", input: tier }),
      ]);
      expect(body.error).toMatchObject({ param: "service_tier", code: "enum" });
      expect(stack.llm.requests.length).toBe(before);
    },
  );

  it("forwards the tiers billed at most at the catalogue's prices: default and flex", async () => {
    for (const tier of ["default", "flex"]) {
      const { res } = await create({ input: "hi", service_tier: tier });
      expect(res.status).toBe(200);
      expect(upstream()).toMatchObject({ service_tier: tier });
    }
  });

  it("gives the output text's logprobs when include asks for them, in the answer and in the stream", async () => {
    const { body } = await create({
      input: "hi",
      include: ["message.output_text.logprobs"],
      top_logprobs: 2,
    });
    expect(upstream()).toMatchObject({ logprobs: true, top_logprobs: 2 });
    const logprobs = body.output[0].content[0].logprobs;
    expect(logprobs.map((t: { token: string }) => t.token).join("")).toBe("Echo: hi");
    expect(logprobs[0]).toEqual({
      token: "Echo: ",
      logprob: -0.5,
      bytes: [...Buffer.from("Echo: ")],
      top_logprobs: [
        { token: "Echo:?", logprob: -2, bytes: [...Buffer.from("Echo:?")] },
        { token: "Echo:?1", logprob: -2, bytes: [...Buffer.from("Echo:?1")] },
      ],
    });
    const key = (await stack.createKey()).secret;
    const res = await stack.call(key, RESPONSES, {
      json: { input: "hi", stream: true, include: ["message.output_text.logprobs"] },
      user: "alice",
    });
    const events = parseEvents(await res.text());
    const done = events.find((e) => e.type === "response.output_text.done")!;
    expect(done.data.logprobs.map((t: { token: string }) => t.token)).toEqual(["Echo: ", "hi"]);
    const completed = events.at(-1)!;
    expect(completed.data.response.output[0].content[0].logprobs).toEqual(done.data.logprobs);
  });

  it("sends an input message's several text parts on in those parts (one part as plain text)", async () => {
    const { res } = await create({
      input: [
        { role: "developer", content: [{ type: "input_text", text: "Be brief." }] },
        {
          role: "user",
          content: [
            { type: "input_text", text: "Hello" },
            { type: "input_text", text: "World" },
          ],
        },
      ],
    });
    expect(res.status).toBe(200);
    expect(upstream().messages).toEqual([
      { role: "developer", content: "Be brief." },
      {
        role: "user",
        content: [
          { type: "text", text: "Hello" },
          { type: "text", text: "World" },
        ],
      },
    ]);
  });

  it("enforces max_tool_calls: calls past it are not kept, 1 asks for one at a time, 0 offers none", async () => {
    const one = await create({ input: "weather?", tools: [WEATHER, TIME], max_tool_calls: 1 });
    expect(upstream()).toMatchObject({ parallel_tool_calls: false });
    expect(one.body.output.map((o: { type: string }) => o.type)).toEqual(["function_call"]);
    expect(one.body.max_tool_calls).toBe(1);
    const none = await create({ input: "weather?", tools: [WEATHER, TIME], max_tool_calls: 0 });
    expect(upstream()).toMatchObject({ tool_choice: "none" });
    expect(none.body.output.map((o: { type: string }) => o.type)).toEqual(["message"]);
    // A choice that forces a call cannot be kept with none allowed: refused, saying why (not "needs a tool").
    for (const tool_choice of ["required", { type: "function", name: "get_time" }]) {
      const forced = await create({
        input: "weather?",
        tools: [WEATHER, TIME],
        max_tool_calls: 0,
        tool_choice,
      });
      expect(forced.res.status).toBe(422);
      expect(forced.body.detail[0].loc).toEqual(["body", "tool_choice"]);
      expect(forced.body.detail[0].msg).toContain("max_tool_calls: 0");
    }
    // Three calls made, two allowed: the answer and the stream keep the first two.
    const three = [WEATHER, TIME, { type: "function", name: "get_date" }];
    const two = await create({ input: "weather?", tools: three, max_tool_calls: 2 });
    expect(upstream().tools).toHaveLength(3);
    expect(two.body.output.map((o: { name: string }) => o.name)).toEqual(["get_weather", "get_time"]);
    const key = (await stack.createKey()).secret;
    const res = await stack.call(key, RESPONSES, {
      json: { input: "weather?", tools: three, max_tool_calls: 2, stream: true },
      user: "alice",
    });
    const events = parseEvents(await res.text());
    const completed = events.at(-1)!;
    expect(completed.data.response.output.map((o: { name: string }) => o.name)).toEqual([
      "get_weather",
      "get_time",
    ]);
    expect(events.filter((e) => e.type === "response.output_item.added")).toHaveLength(2);
    const argsDone = events.filter((e) => e.type === "response.function_call_arguments.done");
    expect(argsDone.map((e) => e.data.name)).toEqual(["get_weather", "get_time"]);
  });

  it("pads each delta event with obfuscation when stream_options asks for it", async () => {
    const key = (await stack.createKey()).secret;
    const stream = async (include_obfuscation: boolean) => {
      const res = await stack.call(key, RESPONSES, {
        json: { input: "one two three", stream: true, stream_options: { include_obfuscation } },
        user: "alice",
      });
      return parseEvents(await res.text()).filter((e) => e.type === "response.output_text.delta");
    };
    const padded = await stream(true);
    expect(padded.length).toBeGreaterThan(1);
    for (const e of padded) expect(e.data.obfuscation).toMatch(/^[A-Za-z0-9_-]+$/);
    for (const e of await stream(false)) expect(e.data).not.toHaveProperty("obfuscation");
  });

  it("does not keep a response with store: false", async () => {
    const { res, body, secret } = await create({ input: "hi", store: false });
    expect(res.status).toBe(200);
    expect(body).toMatchObject({ status: "completed", store: false });
    expect((await stack.call(secret, `${RESPONSES}/${body.id}`, { user: "alice" })).status).toBe(404);
    const chained = await stack.call(secret, RESPONSES, {
      json: { input: "more", previous_response_id: body.id },
      user: "alice",
    });
    expect(chained.status).toBe(404);
  });

  it("is incomplete when the model stops at max_output_tokens", async () => {
    const { body } = await create({ input: "one two three four", max_output_tokens: 2 });
    expect(body).toMatchObject({
      status: "incomplete",
      incomplete_details: { reason: "max_output_tokens" },
      completed_at: null,
      output: [{ type: "message", status: "incomplete", content: [{ text: "Echo: one" }] }],
    });
    const streamed = await stack.call((await stack.createKey()).secret, RESPONSES, {
      json: { input: "one two three four", max_output_tokens: 2, stream: true },
      user: "alice",
    });
    const events = parseEvents(await streamed.text());
    expect(events.at(-1)).toMatchObject({
      type: "response.incomplete",
      data: { response: { status: "incomplete", incomplete_details: { reason: "max_output_tokens" } } },
    });
    expect(events.at(-2)).toMatchObject({
      type: "response.output_item.done",
      data: { item: { status: "incomplete", content: [{ text: "Echo: one" }] } },
    });
  });
});

describe("tool calls", () => {
  it("passes function tools and tool_choice on, and returns the calls as function_call items", async () => {
    const { res, body } = await create({
      input: "Paris",
      tools: [WEATHER, TIME],
      tool_choice: { type: "function", name: "get_time" },
      parallel_tool_calls: false,
    });
    expect(res.status).toBe(200);
    expect(upstream()).toMatchObject({
      tools: [
        {
          type: "function",
          function: { name: "get_weather", description: WEATHER.description, strict: true },
        },
        { type: "function", function: { name: "get_time" } },
      ],
      tool_choice: { type: "function", function: { name: "get_time" } },
      parallel_tool_calls: false,
    });
    expect(upstream().tools![1]!.function).toEqual({ name: "get_time" }); // nulls are not sent
    expect(body).toMatchObject({
      status: "completed",
      tool_choice: { type: "function", name: "get_time" },
      tools: [WEATHER, TIME],
      parallel_tool_calls: false,
      output: [
        {
          type: "function_call",
          id: expect.stringMatching(/^fc_/),
          status: "completed",
          call_id: expect.stringMatching(/^call_/),
          name: "get_time",
          arguments: '{"text":"Paris"}',
        },
      ],
    });
    expect(body.output).toHaveLength(1);
  });

  it("streams parallel calls, each with its own item and argument events", async () => {
    const { secret } = await create({ input: "x" });
    const res = await stack.call(secret, RESPONSES, {
      json: { input: "Rome", tools: [WEATHER, TIME], stream: true },
      user: "alice",
    });
    const events = parseEvents(await res.text());
    expect(events.map((e) => e.type)).toEqual([
      "response.created",
      "response.in_progress",
      "response.output_item.added",
      "response.function_call_arguments.delta",
      "response.function_call_arguments.delta",
      "response.function_call_arguments.done",
      "response.output_item.done",
      "response.output_item.added",
      "response.function_call_arguments.delta",
      "response.function_call_arguments.delta",
      "response.function_call_arguments.done",
      "response.output_item.done",
      "response.completed",
    ]);
    const [first, second] = events.at(-1)!.data.response.output;
    expect([first.name, second.name]).toEqual(["get_weather", "get_time"]);
    expect(events[2]!.data).toMatchObject({
      output_index: 0,
      item: {
        type: "function_call",
        id: first.id,
        call_id: first.call_id,
        name: "get_weather",
        arguments: "",
      },
    });
    expect(events[5]!.data).toMatchObject({
      item_id: first.id,
      output_index: 0,
      arguments: '{"text":"Rome"}',
    });
    expect(events[8]!.data).toMatchObject({ item_id: second.id, output_index: 1 });
    expect(events[3]!.data.delta + events[4]!.data.delta).toBe('{"text":"Rome"}');
  });

  it("answers a function call output by chaining, as chat-completions tool messages", async () => {
    const first = await create({ input: "Paris", tools: [WEATHER] });
    const call = first.body.output[0];
    const second = await create(
      {
        previous_response_id: first.body.id,
        input: [
          {
            type: "function_call_output",
            call_id: call.call_id,
            output: [{ type: "input_text", text: "sunny" }],
          },
        ],
        tools: [WEATHER],
      },
      "alice",
      first.secret,
    );
    expect(second.res.status).toBe(200);
    expect(second.body.output[0].content[0].text).toBe("Echo: sunny");
    expect(upstream().messages).toEqual([
      { role: "user", content: "Paris" },
      {
        role: "assistant",
        content: null,
        tool_calls: [
          {
            id: call.call_id,
            type: "function",
            function: { name: "get_weather", arguments: call.arguments },
          },
        ],
      },
      { role: "tool", tool_call_id: call.call_id, content: "sunny" },
    ]);
  });

  it("refuses a function call output that answers no call (422), before the model is asked", async () => {
    const before = stack.llm.requests.length;
    const { res, body } = await create({
      input: [
        { role: "user", content: "hi" },
        { type: "function_call_output", call_id: "call_nowhere", output: "x" },
      ],
    });
    expect(res.status).toBe(422);
    expect(body.detail).toEqual([
      expect.objectContaining({
        loc: ["body", "input", 1, "call_id"],
        type: "value_error",
        input: "call_nowhere",
      }),
    ]);
    expect(stack.llm.requests.length).toBe(before);
  });

  it("keeps a conversation's tool calls and outputs as its items, and leaves out calls never answered", async () => {
    const key = await stack.createKey();
    const conversation = await (
      await stack.call(key.secret, "/api/v1/llm/conversations", { json: {}, user: "alice" })
    ).json();
    const ask = async (input: unknown, tools?: unknown[]) => {
      const res = await stack.call(key.secret, RESPONSES, {
        json: { input, conversation: conversation.id, ...(tools ? { tools } : {}) },
        user: "alice",
      });
      expect(res.status).toBe(200);
      return res.json();
    };
    const called = await ask("Paris", [WEATHER]);
    // The caller moves on without answering the call: chat providers refuse an unanswered call.
    await ask("never mind");
    expect(upstream().messages).toEqual([
      { role: "user", content: "Paris" },
      { role: "user", content: "never mind" },
    ]);
    const list = await (
      await stack.call(key.secret, `/api/v1/llm/conversations/${conversation.id}/items?order=asc`, {
        user: "alice",
      })
    ).json();
    expect(list.data.map((i: { type: string }) => i.type)).toEqual([
      "message",
      "function_call",
      "message",
      "message",
    ]);
    expect(list.data[1]).toEqual(called.output[0]);
  });
});

describe("truncation", () => {
  it("auto (the default) drops the oldest earlier items; disabled refuses with 400 instead", async () => {
    const first = await create({ input: "q1" });
    let previous = first.body.id;
    for (const q of ["q2", "q3"]) {
      const next = await create({ input: q, previous_response_id: previous }, "alice", first.secret);
      previous = next.body.id;
    }
    // Six earlier items, four fit (LLM_CONTEXT_MAX_ITEMS).
    const auto = await create({ input: "q4", previous_response_id: previous }, "alice", first.secret);
    expect(auto.res.status).toBe(200);
    expect(upstream().messages.map((m) => m.content)).toEqual(["q2", "Echo: q2", "q3", "Echo: q3", "q4"]);
    const before = stack.llm.requests.length;
    const disabled = await create(
      { input: "q4", previous_response_id: previous, truncation: "disabled" },
      "alice",
      first.secret,
    );
    expect(disabled.res.status).toBe(400);
    expect(disabled.body).toEqual(
      llmError("bad_request", expect.stringContaining("truncation"), "truncation"),
    );
    expect(stack.llm.requests.length).toBe(before);
    // Exactly as many as fit: disabled is fine.
    const two = await create(
      { input: "q3", previous_response_id: first.body.id, truncation: "disabled" },
      "alice",
      first.secret,
    );
    expect(two.res.status).toBe(200);
  });
});
