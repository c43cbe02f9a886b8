import type { FakeLLM } from "@gw/test-kit/llm-upstream";
import OpenAI, {
  APIError,
  AuthenticationError,
  BadRequestError,
  NotFoundError,
  PermissionDeniedError,
  RateLimitError,
  toFile,
  UnprocessableEntityError,
} from "openai";
import type {
  FunctionTool,
  ResponseFunctionToolCall,
  ResponseStreamEvent,
} from "openai/resources/responses/responses";
import { expect, it } from "vitest";

/** A running stack for the OpenAI SDK: the gateway's base URL, the test provider behind it, keys. */
export interface SdkTarget {
  gatewayUrl: string;
  llm: FakeLLM;
  /** A new key in a fresh organization (its owner `backend`). */
  createKey(input?: {
    permissions?: string[];
    limits?: { second?: number; minute?: number; hour?: number; day?: number };
    models?: string[];
  }): Promise<{ secret: string }>;
}

const WEATHER: FunctionTool = {
  type: "function",
  name: "get_weather",
  description: "The weather in a city",
  parameters: { type: "object", properties: { text: { type: "string" } }, required: ["text"] },
  strict: false,
};

/**
 * The official `openai` SDK against the gateway, as a user points it there:
 * `baseURL` the gateway's `/api/v1/llm`, the API key as `apiKey`, the end
 * user in `X-On-Behalf-Of` through `defaultHeaders`. Registers its cases in
 * the enclosing `describe`; `target` is read when they run.
 */
export function openaiSdkCases(target: () => SdkTarget): void {
  const client = (secret: string, user?: string) =>
    new OpenAI({
      apiKey: secret,
      baseURL: `${target().gatewayUrl}/api/v1/llm`,
      defaultHeaders: user ? { "X-On-Behalf-Of": user } : {},
      maxRetries: 0,
    });
  /** alice's and bob's clients on one key (one organization), and the key. */
  const org = async (input?: Parameters<SdkTarget["createKey"]>[0]) => {
    const key = await target().createKey(input);
    return { key, alice: client(key.secret, "alice"), bob: client(key.secret, "bob") };
  };
  const grant = async (secret: string, owner: string, body: Record<string, string>) => {
    const res = await fetch(`${target().gatewayUrl}/api/v1/authorization/llm/grant`, {
      method: "POST",
      headers: {
        authorization: `Bearer ${secret}`,
        "x-on-behalf-of": owner,
        "content-type": "application/json",
      },
      body: JSON.stringify(body),
    });
    expect(res.status).toBe(204);
  };
  const lastUpstream = () => target().llm.requests.at(-1)!.body;

  it("creates, retrieves and deletes a response", async () => {
    const { alice } = await org();
    const created = await alice.responses.create({ model: "auto", input: "hello there" });
    expect(created).toMatchObject({
      object: "response",
      status: "completed",
      output_text: "Echo: hello there",
      output: [
        { type: "message", role: "assistant", content: [{ type: "output_text", text: "Echo: hello there" }] },
      ],
      usage: { input_tokens: expect.any(Number), output_tokens: 3 },
    });
    expect(created.id).toMatch(/^resp_/);
    const retrieved = await alice.responses.retrieve(created.id);
    expect(retrieved).toEqual(created);
    await alice.responses.delete(created.id);
    await expect(alice.responses.retrieve(created.id)).rejects.toBeInstanceOf(NotFoundError);
  });

  it("takes null for optional fields as absent, and forwards the fields it honours", async () => {
    const { alice } = await org();
    const response = await alice.responses.create({
      input: "hi",
      instructions: null,
      max_output_tokens: null,
      metadata: null,
      previous_response_id: null,
      conversation: null,
      background: null,
      reasoning: null,
      tool_choice: "auto",
      temperature: 0.2,
      top_p: 0.9,
      user: "end-user-7",
      store: true,
      truncation: "auto",
      text: { format: { type: "json_schema", name: "answer", schema: { type: "object" }, strict: true } },
    });
    expect(response).toMatchObject({
      status: "completed",
      temperature: 0.2,
      top_p: 0.9,
      instructions: null,
      metadata: {},
    });
    expect(lastUpstream()).toMatchObject({
      temperature: 0.2,
      top_p: 0.9,
      user: "end-user-7",
      response_format: {
        type: "json_schema",
        json_schema: { name: "answer", schema: { type: "object" }, strict: true },
      },
    });
  });

  it("responses.stream().finalResponse() accumulates the streamed events into the stored response", async () => {
    const { alice } = await org();
    const stream = alice.responses.stream({ input: "one two three" });
    const snapshots: string[] = [];
    stream.on("response.output_text.delta", (event) => snapshots.push(event.snapshot));
    const final = await stream.finalResponse();
    expect(final.status).toBe("completed");
    expect(final.output_text).toBe("Echo: one two three");
    expect(snapshots.at(-1)).toBe("Echo: one two three");
    expect(snapshots.length).toBeGreaterThan(1);
    // The SDK adds `parsed` to the text it accumulates.
    expect(final.output).toMatchObject((await alice.responses.retrieve(final.id)).output);
  });

  it("iterates a raw stream: every event in OpenAI's order, numbered from 0", async () => {
    const { alice } = await org();
    const stream = await alice.responses.create({ input: "a b", stream: true });
    const events: ResponseStreamEvent[] = [];
    for await (const event of stream) events.push(event);
    expect(events.map((e) => e.sequence_number)).toEqual(events.map((_, i) => i));
    expect(events.map((e) => e.type).filter((t) => t !== "response.output_text.delta")).toEqual([
      "response.created",
      "response.in_progress",
      "response.output_item.added",
      "response.content_part.added",
      "response.output_text.done",
      "response.content_part.done",
      "response.output_item.done",
      "response.completed",
    ]);
    const completed = events.at(-1);
    expect(completed?.type === "response.completed" && completed.response.output).toMatchObject([
      { type: "message", content: [{ type: "output_text", text: "Echo: a b" }] },
    ]);
  });

  it("round-trips a tool call: the model calls a function, the caller answers with its output", async () => {
    const { alice } = await org();
    const first = await alice.responses.create({ input: "Paris", tools: [WEATHER] });
    const call = first.output[0] as ResponseFunctionToolCall;
    expect(first.output).toHaveLength(1);
    expect(call).toMatchObject({ type: "function_call", name: "get_weather", status: "completed" });
    expect(JSON.parse(call.arguments)).toEqual({ text: "Paris" });
    expect(lastUpstream().tools).toEqual([
      {
        type: "function",
        function: {
          name: "get_weather",
          description: WEATHER.description,
          parameters: WEATHER.parameters,
          strict: false,
        },
      },
    ]);

    const second = await alice.responses.create({
      previous_response_id: first.id,
      input: [{ type: "function_call_output", call_id: call.call_id, output: "sunny, 24°C" }],
      tools: [WEATHER],
    });
    expect(second.output_text).toBe("Echo: sunny, 24°C");
    expect(lastUpstream().messages).toEqual([
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
      { role: "tool", tool_call_id: call.call_id, content: "sunny, 24°C" },
    ]);

    // Without chaining: the earlier output sent back as input, as the SDK's examples do.
    const manual = await alice.responses.create({
      input: [
        { role: "user", content: "Paris" },
        call,
        { type: "function_call_output", call_id: call.call_id, output: "rainy" },
      ],
      tools: [WEATHER],
    });
    expect(manual.output_text).toBe("Echo: rainy");
  });

  it("streams a tool call: finalResponse() holds the whole function call", async () => {
    const { alice } = await org();
    const stream = alice.responses.stream({ input: "Oslo", tools: [WEATHER] });
    const argumentDeltas: string[] = [];
    stream.on("response.function_call_arguments.delta", (event) => argumentDeltas.push(event.delta));
    const final = await stream.finalResponse();
    const call = final.output[0] as ResponseFunctionToolCall;
    expect(call).toMatchObject({ type: "function_call", name: "get_weather", status: "completed" });
    expect(JSON.parse(call.arguments)).toEqual({ text: "Oslo" });
    expect(argumentDeltas.join("")).toBe(call.arguments);
    expect(argumentDeltas.length).toBeGreaterThan(1);
    // The SDK adds `parsed_arguments` to the calls it accumulates.
    expect(final.output).toMatchObject((await alice.responses.retrieve(final.id)).output);
  });

  it("chains from previous_response_id for a reader; a stranger gets 404, exactly as for an unknown id", async () => {
    const { key, alice, bob } = await org();
    const first = await alice.responses.create({ input: "my secret plan" });
    const mallory = client(key.secret, "mallory");
    const outsider = client((await target().createKey()).secret, "alice");
    const before = target().llm.requests.length;
    for (const [who, id] of [
      [bob, first.id],
      [mallory, first.id],
      [outsider, first.id],
      [bob, "resp_0000000000000000000000000000dead"],
    ] as const) {
      await expect(
        who.responses.create({ previous_response_id: id, input: "tell me" }),
      ).rejects.toBeInstanceOf(NotFoundError);
      await expect(who.responses.retrieve(id)).rejects.toBeInstanceOf(NotFoundError);
      await expect(who.responses.delete(id)).rejects.toBeInstanceOf(NotFoundError);
      await expect(who.responses.cancel(id)).rejects.toBeInstanceOf(NotFoundError);
    }
    expect(target().llm.requests.length).toBe(before);

    await grant(key.secret, "alice", {
      resourceType: "response",
      resourceId: first.id,
      userId: "bob",
      role: "reader",
    });
    const next = await bob.responses.create({ previous_response_id: first.id, input: "and then?" });
    expect(next.previous_response_id).toBe(first.id);
    expect(lastUpstream().messages).toEqual([
      { role: "user", content: "my secret plan" },
      { role: "assistant", content: "Echo: my secret plan" },
      { role: "user", content: "and then?" },
    ]);
    // bob owns his own response, not alice's: reading hers is fine, deleting it is not.
    await expect(bob.responses.delete(first.id)).rejects.toBeInstanceOf(PermissionDeniedError);
    expect((await alice.responses.retrieve(first.id)).id).toBe(first.id);
  });

  it("lists a response's input items, paged", async () => {
    const { alice } = await org();
    const response = await alice.responses.create({
      input: [
        { role: "developer", content: "Be brief." },
        { role: "user", content: "one" },
        { role: "assistant", content: "uno" },
        { role: "user", content: "two" },
      ],
    });
    const texts: string[] = [];
    for await (const item of alice.responses.inputItems.list(response.id, { limit: 3, order: "asc" })) {
      if (item.type === "message") texts.push(`${item.role}: ${(item.content[0] as { text: string }).text}`);
    }
    expect(texts).toEqual(["developer: Be brief.", "user: one", "assistant: uno", "user: two"]);
    const newestFirst = await alice.responses.inputItems.list(response.id, { limit: 2 });
    expect(newestFirst.data.map((i) => i.type === "message" && i.role)).toEqual(["user", "assistant"]);
    expect(newestFirst.has_more).toBe(true);
  });

  it("works with conversations and their items", async () => {
    const { key, alice, bob } = await org();
    const conversation = await alice.conversations.create({
      metadata: { topic: "travel" },
      items: [{ type: "message", role: "user", content: "I like trains." }],
    });
    expect(conversation).toMatchObject({ object: "conversation", metadata: { topic: "travel" } });
    const answer = await alice.responses.create({ conversation: conversation.id, input: "Where to?" });
    expect(answer.output_text).toBe("Echo: Where to?");
    expect(lastUpstream().messages.map((m) => m.content)).toEqual(["I like trains.", "Where to?"]);

    const added = await alice.conversations.items.create(conversation.id, {
      items: [
        { type: "message", role: "user", content: [{ type: "input_text", text: "Add this." }] },
        { type: "message", role: "assistant", content: "Added." },
      ],
    });
    expect(added.data).toHaveLength(2);
    const all: string[] = [];
    for await (const item of alice.conversations.items.list(conversation.id, { limit: 2, order: "asc" })) {
      if (item.type === "message") all.push((item.content[0] as { text: string }).text);
    }
    expect(all).toEqual(["I like trains.", "Where to?", "Echo: Where to?", "Add this.", "Added."]);

    const itemId = added.data[0]!.id!;
    const item = await alice.conversations.items.retrieve(itemId, { conversation_id: conversation.id });
    expect(item).toMatchObject({ id: itemId, type: "message", role: "user" });
    // bob reads it once granted reader, but may not change it.
    await expect(
      bob.conversations.items.retrieve(itemId, { conversation_id: conversation.id }),
    ).rejects.toBeInstanceOf(NotFoundError);
    await grant(key.secret, "alice", {
      resourceType: "conversation",
      resourceId: conversation.id,
      userId: "bob",
      role: "reader",
    });
    expect((await bob.conversations.items.retrieve(itemId, { conversation_id: conversation.id })).id).toBe(
      itemId,
    );
    await expect(
      bob.conversations.items.delete(itemId, { conversation_id: conversation.id }),
    ).rejects.toBeInstanceOf(PermissionDeniedError);

    const afterDelete = await alice.conversations.items.delete(itemId, { conversation_id: conversation.id });
    expect(afterDelete).toMatchObject({ id: conversation.id, object: "conversation" });
    await expect(
      alice.conversations.items.retrieve(itemId, { conversation_id: conversation.id }),
    ).rejects.toBeInstanceOf(NotFoundError);

    expect(await alice.conversations.update(conversation.id, { metadata: { topic: "boats" } })).toMatchObject(
      {
        metadata: { topic: "boats" },
      },
    );
    expect(await alice.conversations.delete(conversation.id)).toEqual({
      id: conversation.id,
      object: "conversation.deleted",
      deleted: true,
    });
    await expect(alice.conversations.retrieve(conversation.id)).rejects.toBeInstanceOf(NotFoundError);
  });

  it("errors carry OpenAI's error body: the SDK shows the reason, its code, type and param", async () => {
    const { key, alice } = await org();
    const mine = await alice.responses.create({ input: "mine" });
    const bob = client(key.secret, "bob");
    const notFound = await bob.responses.retrieve(mine.id).catch((e: unknown) => e);
    expect(notFound).toBeInstanceOf(NotFoundError);
    expect(notFound).toMatchObject({
      status: 404,
      message: `404 No response ${mine.id}`,
      code: "not_found",
      type: "invalid_request_error",
      param: null,
    });
    const cancel = await alice.responses.cancel(mine.id).catch((e: unknown) => e);
    expect(cancel).toBeInstanceOf(BadRequestError);
    expect((cancel as BadRequestError).message).toMatch(/^400 Only background responses can be cancelled/);
    expect(cancel).toMatchObject({ code: "bad_request", type: "invalid_request_error" });

    const stranger = client("gwsk_not-a-real-key-not-a-real-key-not-a-real-k", "alice");
    const unauthorized = await stranger.responses.retrieve(mine.id).catch((e: unknown) => e);
    expect(unauthorized).toMatchObject({
      status: 401,
      message: "401 Invalid API key",
      code: "unauthorized",
      type: "authentication_error",
    });
    const readOnly = await org({ permissions: ["responses:read"] });
    const forbidden = await readOnly.alice.responses.create({ input: "x" }).catch((e: unknown) => e);
    expect(forbidden).toMatchObject({
      status: 403,
      message: "403 This credential lacks the 'responses:write' permission",
      code: "forbidden",
      type: "permission_error",
    });
  });

  it("maps every refusal to the SDK's error classes: 401, 403, 404, 422, 429", async () => {
    const { alice } = await org();
    const stranger = client("gwsk_not-a-real-key-not-a-real-key-not-a-real-k", "alice");
    await expect(stranger.responses.create({ input: "x" })).rejects.toBeInstanceOf(AuthenticationError);

    const readOnly = await org({ permissions: ["responses:read"] });
    await expect(readOnly.alice.responses.create({ input: "x" })).rejects.toBeInstanceOf(
      PermissionDeniedError,
    );

    await expect(alice.responses.retrieve("resp_unknown")).rejects.toBeInstanceOf(NotFoundError);
    await expect(alice.conversations.retrieve("conv_unknown")).rejects.toBeInstanceOf(NotFoundError);

    for (const refused of [
      { input: "x", tools: [{ type: "web_search" as const }] },
      { input: "x", prompt: { id: "pmpt_1" } },
    ]) {
      await expect(alice.responses.create(refused)).rejects.toBeInstanceOf(UnprocessableEntityError);
    }

    const limited = await org({ limits: { minute: 2 } });
    await limited.alice.responses.create({ input: "one" });
    await limited.alice.responses.create({ input: "two" });
    const before = target().llm.requests.length;
    const error = await limited.alice.responses.create({ input: "three" }).catch((e) => e);
    expect(error).toBeInstanceOf(RateLimitError);
    expect(error.headers.get("retry-after")).toMatch(/^\d+$/);
    expect(target().llm.requests.length).toBe(before);
  });

  it("starts a conversation with an empty list of items, as the Agents SDK's sessions do", async () => {
    const { alice } = await org();
    const conversation = await alice.conversations.create({ items: [] });
    expect(conversation.id).toMatch(/^conv_/);
    const items = await alice.conversations.items.list(conversation.id);
    expect(items.data).toEqual([]);
  });

  it("forwards reasoning effort and verbosity, takes a reasoning summary, and a 422's message names the field", async () => {
    const { alice } = await org();
    const response = await alice.responses.create({
      input: "think",
      reasoning: { effort: "low", summary: "auto" },
      text: { verbosity: "low" },
    });
    expect(response.reasoning).toMatchObject({ effort: "low", summary: "auto" });
    expect(lastUpstream()).toMatchObject({ reasoning_effort: "low", verbosity: "low" });
    const refused = await alice.responses
      .create({ input: "x", prompt: { id: "pmpt_1" } })
      .catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(UnprocessableEntityError);
    expect(refused).toMatchObject({
      status: 422,
      message: expect.stringMatching(
        /^422 Invalid 'prompt': prompt \(stored prompt templates\) is not supported/,
      ),
      param: "prompt",
      type: "invalid_request_error",
      code: "value_error",
    });
    expect((refused as UnprocessableEntityError).error).toMatchObject({
      param: "prompt",
      code: "value_error",
    });
  });

  it("a provider's 429 is a RateLimitError with the provider's Retry-After, in OpenAI's shape", async () => {
    const { alice } = await org();
    target().llm.mode = "rate-limit";
    try {
      const error = await alice.responses.create({ input: "x" }).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(RateLimitError);
      expect(error).toMatchObject({ status: 429, type: "rate_limit_error", code: "provider_rate_limited" });
      expect((error as RateLimitError).headers.get("retry-after")).toBe("7");
    } finally {
      target().llm.mode = "ok";
    }
  });

  it("resolves item_reference input items the caller may read; others are 404", async () => {
    const { key, alice } = await org();
    const first = await alice.responses.create({ input: "remember me" });
    const second = await alice.responses.create({
      input: [
        { type: "item_reference", id: first.output[0]!.id! },
        { role: "user", content: "and now?" },
      ],
    });
    expect(second.output_text).toBe("Echo: and now?");
    expect(lastUpstream().messages[0]).toEqual({ role: "assistant", content: "Echo: remember me" });
    const bob = client(key.secret, "bob");
    const refused = await bob.responses
      .create({ input: [{ type: "item_reference", id: first.output[0]!.id! }] })
      .catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(NotFoundError);
    expect((refused as NotFoundError).message).toBe(`404 No item ${first.output[0]!.id}`);
  });

  it("lists and retrieves models, limited to the key's allowlist", async () => {
    const { alice } = await org();
    const all = await alice.models.list();
    expect(all.data.length).toBeGreaterThan(0);
    const first = all.data[0]!;
    expect(await alice.models.retrieve(first.id)).toEqual(first);
    await expect(alice.models.retrieve("no-such-model")).rejects.toBeInstanceOf(NotFoundError);

    const limited = await org({ models: [first.id] });
    expect((await limited.alice.models.list()).data.map((m) => m.id)).toEqual([first.id]);
    const refused = await limited.alice.responses
      .create({ model: "another-model", input: "x" })
      .catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(PermissionDeniedError);
    expect(refused).toMatchObject({
      message: "403 This API key may not use the model 'another-model'",
      param: "model",
    });
    const chat = await limited.alice.chat.completions
      .create({ model: "another-model", messages: [{ role: "user", content: "x" }] })
      .catch((e: unknown) => e);
    expect(chat).toBeInstanceOf(PermissionDeniedError);
  });

  it("counts input tokens with responses.inputTokens.count", async () => {
    const { alice } = await org();
    const before = target().llm.requests.length;
    const counted = await alice.responses.inputTokens.count({ model: "gpt-4o", input: "hello there" });
    expect(counted).toEqual({ object: "response.input_tokens", input_tokens: 9 });
    expect(target().llm.requests.length).toBe(before);
  });

  it("chat.completions.create: JSON and streamed with include_usage, tools, marked deprecated", async () => {
    const { alice } = await org();
    const { data, response } = await alice.chat.completions
      .create({ model: "auto", messages: [{ role: "user", content: "hello there" }] })
      .withResponse();
    expect(response.headers.get("deprecation")).toMatch(/^@\d+$/);
    expect(data.choices[0]!.message.content).toBe("Echo: hello there");
    expect(data.id).toMatch(/^chatcmpl-/);

    const stream = await alice.chat.completions.create({
      model: "auto",
      messages: [{ role: "user", content: "one two three" }],
      stream: true,
      stream_options: { include_usage: true },
    });
    let text = "";
    let usage: { completion_tokens: number } | null | undefined;
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta.content ?? "";
      if (chunk.usage) usage = chunk.usage;
    }
    expect(text).toBe("Echo: one two three");
    expect(usage?.completion_tokens).toBe(4);

    const runner = alice.chat.completions.stream({
      model: "auto",
      messages: [{ role: "user", content: "Paris" }],
      tools: [
        {
          type: "function",
          function: { name: "get_weather", parameters: WEATHER.parameters as Record<string, unknown> },
        },
      ],
    });
    const final = await runner.finalChatCompletion();
    const call = final.choices[0]!.message.tool_calls![0]!;
    expect(call.type === "function" && JSON.parse(call.function.arguments)).toEqual({ text: "Paris" });
    expect(final.choices[0]!.finish_reason).toBe("tool_calls");
  });

  it("chat.completions.create with n, penalties, logit_bias and logprobs: sent on, n choices streamed by index; n refused on responses", async () => {
    const { alice } = await org();
    const answer = await alice.chat.completions.create({
      model: "auto",
      messages: [{ role: "user", content: "one two" }],
      n: 2,
      presence_penalty: 0.5,
      frequency_penalty: 0.25,
      logit_bias: { "42": -100 },
      logprobs: true,
      top_logprobs: 1,
    });
    expect(lastUpstream()).toMatchObject({
      n: 2,
      presence_penalty: 0.5,
      frequency_penalty: 0.25,
      logit_bias: { "42": -100 },
      logprobs: true,
      top_logprobs: 1,
    });
    expect(answer.choices.map((c) => [c.index, c.message.content])).toEqual([
      [0, "Echo: one two"],
      [1, "Echo: one two #2"],
    ]);
    expect(answer.choices[1]!.logprobs!.content!.map((t) => t.token).join("")).toBe("Echo: one two #2");
    expect(answer.usage?.completion_tokens).toBe(3 + 4);

    // The SDK's stream helper puts each choice together from the chunks that carry its index.
    const runner = alice.chat.completions.stream({
      model: "auto",
      messages: [{ role: "user", content: "hi" }],
      n: 2,
      logprobs: true,
    });
    const final = await runner.finalChatCompletion();
    expect(final.choices.map((c) => [c.index, c.message.content, c.finish_reason])).toEqual([
      [0, "Echo: hi", "stop"],
      [1, "Echo: hi #2", "stop"],
    ]);
    expect(final.choices[1]!.logprobs!.content!.map((t) => t.token).join("")).toBe("Echo: hi #2");

    const refused = await alice.responses
      .create({ model: "auto", input: "hi", n: 2 } as never)
      .catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(UnprocessableEntityError);
    expect(refused).toMatchObject({ status: 422, param: "n", code: "value_error" });
  });

  it("a stored chat completion is 404 for bob until alice grants him reader, then readable and not writable", async () => {
    const { key, alice, bob } = await org();
    const completion = await alice.chat.completions.create({
      model: "auto",
      messages: [{ role: "user", content: "private" }],
      store: true,
      metadata: { topic: "secret" },
    });
    await expect(bob.chat.completions.retrieve(completion.id)).rejects.toBeInstanceOf(NotFoundError);
    await expect(bob.chat.completions.messages.list(completion.id)).rejects.toBeInstanceOf(NotFoundError);
    expect((await bob.chat.completions.list()).data).toEqual([]);

    await grant(key.secret, "alice", {
      resourceType: "completion",
      resourceId: completion.id,
      userId: "bob",
      role: "reader",
    });
    const read = await bob.chat.completions.retrieve(completion.id);
    expect(read.choices[0]!.message.content).toBe("Echo: private");
    const messages: string[] = [];
    for await (const message of bob.chat.completions.messages.list(completion.id))
      messages.push(String(message.content));
    expect(messages).toEqual(["private"]);
    expect((await bob.chat.completions.list()).data.map((c) => c.id)).toEqual([completion.id]);
    await expect(
      bob.chat.completions.update(completion.id, { metadata: { topic: "mine" } }),
    ).rejects.toBeInstanceOf(PermissionDeniedError);
    await expect(bob.chat.completions.delete(completion.id)).rejects.toBeInstanceOf(PermissionDeniedError);

    const updated = await alice.chat.completions.update(completion.id, { metadata: { topic: "shared" } });
    expect(updated.metadata).toEqual({ topic: "shared" });
    expect(await alice.chat.completions.delete(completion.id)).toEqual({
      id: completion.id,
      object: "chat.completion.deleted",
      deleted: true,
    });
    await expect(alice.chat.completions.retrieve(completion.id)).rejects.toBeInstanceOf(NotFoundError);
  });

  it("files.create uploads as multipart (with expires_after); retrieve, list, content and delete; bob sees it only once shared", async () => {
    const { key, alice, bob } = await org();
    const bytes = Buffer.from("retrieval notes: the moon is made of basalt\n");
    const file = await alice.files.create({
      file: await toFile(bytes, "notes.md", { type: "text/markdown" }),
      purpose: "assistants",
      expires_after: { anchor: "created_at", seconds: 3600 },
    });
    expect(file).toEqual({
      id: expect.stringMatching(/^file_[0-9a-f]{32}$/),
      object: "file",
      bytes: bytes.length,
      created_at: expect.any(Number),
      expires_at: file.created_at + 3600,
      filename: "notes.md",
      purpose: "assistants",
      status: "processed",
    });
    expect(await alice.files.retrieve(file.id)).toEqual(file);
    const listed: string[] = [];
    for await (const f of alice.files.list({ purpose: "assistants" })) listed.push(f.id);
    expect(listed).toEqual([file.id]);
    const content = await alice.files.content(file.id);
    expect(content.headers.get("content-disposition")).toBe("attachment; filename=notes.md");
    expect(Buffer.from(await content.arrayBuffer()).equals(bytes)).toBe(true);

    await expect(bob.files.retrieve(file.id)).rejects.toBeInstanceOf(NotFoundError);
    expect((await bob.files.list()).data).toEqual([]);
    await grant(key.secret, "alice", {
      resourceType: "file",
      resourceId: file.id,
      userId: "bob",
      role: "reader",
    });
    expect((await bob.files.list()).data.map((f) => f.id)).toEqual([file.id]);
    expect(await (await bob.files.content(file.id)).text()).toBe(bytes.toString());
    await expect(bob.files.delete(file.id)).rejects.toBeInstanceOf(PermissionDeniedError);

    // An empty file and a purpose OpenAI does not have: 422s the SDK reads as OpenAI's.
    const empty = await alice.files
      .create({ file: await toFile(Buffer.alloc(0), "empty.txt"), purpose: "assistants" })
      .catch((err: unknown) => err);
    expect(empty).toBeInstanceOf(UnprocessableEntityError);
    expect(empty).toMatchObject({ status: 422, param: "file", code: "value_error" });
    const purpose = await alice.files
      .create({ file: await toFile(bytes, "a.txt"), purpose: "training" as "assistants" })
      .catch((err: unknown) => err);
    expect(purpose).toMatchObject({ status: 422, param: "purpose", code: "enum" });
    expect(purpose).toBeInstanceOf(APIError);

    expect(await alice.files.delete(file.id)).toEqual({ id: file.id, object: "file", deleted: true });
    await expect(alice.files.retrieve(file.id)).rejects.toBeInstanceOf(NotFoundError);
  });
}
