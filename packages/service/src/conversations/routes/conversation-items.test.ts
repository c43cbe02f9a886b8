import { describe, expect, it } from "vitest";
import { llmError, useStack } from "../../../test/stack.ts";

const stack = useStack();
const CONV = "/api/v1/llm/conversations";

/** alice's conversation, created with two items, and bob holding `role` on it (none: a stranger). */
async function setup(bobRole?: "writer" | "reader") {
  const key = await stack.createKey();
  const created = await stack.call(key.secret, CONV, {
    json: {
      metadata: null,
      items: [
        { type: "message", role: "user", content: "Hello" },
        { role: "assistant", content: [{ type: "output_text", text: "Hi!", annotations: [] }] },
      ],
    },
    user: "alice",
  });
  expect(created.status).toBe(200);
  const conversation = await created.json();
  if (bobRole) {
    const grant = await stack.call(key.secret, "/api/v1/authorization/llm/grant", {
      json: { resourceType: "conversation", resourceId: conversation.id, userId: "bob", role: bobRole },
      user: "alice",
    });
    expect(grant.status).toBe(204);
  }
  const path = `${CONV}/${conversation.id}/items`;
  const call = (user: string, suffix = "", init: { method?: string; json?: unknown } = {}) =>
    stack.call(key.secret, `${path}${suffix}`, { ...init, user });
  const list = async () => (await (await call("alice", "?order=asc")).json()).data;
  return { key, conversation, call, list };
}

describe("conversation items", () => {
  it("are created with the conversation, in order, with ids of their own", async () => {
    const { conversation, list } = await setup();
    expect(conversation.metadata).toEqual({});
    expect(await list()).toEqual([
      {
        type: "message",
        id: expect.stringMatching(/^msg_[0-9a-f]{32}$/),
        status: "completed",
        role: "user",
        content: [{ type: "input_text", text: "Hello" }],
      },
      {
        type: "message",
        id: expect.stringMatching(/^msg_/),
        status: "completed",
        role: "assistant",
        content: [{ type: "output_text", text: "Hi!", annotations: [], logprobs: [] }],
      },
    ]);
  });

  it("are added, read one at a time and deleted, in OpenAI's shapes", async () => {
    const { conversation, call, list } = await setup();
    const add = await call("alice", "", {
      json: {
        items: [
          { role: "user", content: "Weather?" },
          { type: "function_call", call_id: "call_1", name: "get_weather", arguments: "{}" },
          { type: "function_call_output", call_id: "call_1", output: "sunny" },
        ],
      },
    });
    expect(add.status).toBe(200);
    const added = await add.json();
    expect(added).toEqual({
      object: "list",
      data: [
        expect.objectContaining({ type: "message", role: "user" }),
        {
          type: "function_call",
          id: expect.stringMatching(/^fc_/),
          status: "completed",
          call_id: "call_1",
          name: "get_weather",
          arguments: "{}",
        },
        {
          type: "function_call_output",
          id: expect.stringMatching(/^fco_/),
          status: "completed",
          call_id: "call_1",
          output: "sunny",
        },
      ],
      first_id: added.data[0].id,
      last_id: added.data[2].id,
      has_more: false,
    });
    expect((await list()).map((i: { id: string }) => i.id).slice(2)).toEqual(
      added.data.map((i: { id: string }) => i.id),
    );

    const call1 = added.data[1];
    const got = await call("alice", `/${call1.id}`);
    expect(got.status).toBe(200);
    expect(await got.json()).toEqual(call1);

    const removed = await call("alice", `/${call1.id}`, { method: "DELETE" });
    expect(removed.status).toBe(200);
    expect(await removed.json()).toEqual(conversation);
    expect((await list()).map((i: { type: string }) => i.type)).toEqual([
      "message",
      "message",
      "message",
      "function_call_output",
    ]);
    for (const method of ["GET", "DELETE"]) {
      const gone = await call("alice", `/${call1.id}`, { method });
      expect(gone.status).toBe(404);
      expect(await gone.json()).toEqual(
        llmError("not_found", `No item ${call1.id} in conversation ${conversation.id}`),
      );
    }
  });

  it.each([
    ["writer", { add: 200, get: 200, remove: 200 }],
    ["reader", { add: 403, get: 200, remove: 403 }],
    [undefined, { add: 404, get: 404, remove: 404 }],
  ] as const)("as %s: add, get, delete", async (role, expected) => {
    const { call, list } = await setup(role);
    const [first] = await list();
    const add = await call("bob", "", { json: { items: [{ role: "user", content: "me too" }] } });
    const get = await call("bob", `/${first.id}`);
    const remove = await call("bob", `/${first.id}`, { method: "DELETE" });
    expect({ add: add.status, get: get.status, remove: remove.status }).toEqual(expected);
    const kept = await list();
    expect(kept.map((i: { id: string }) => i.id).includes(first.id)).toBe(expected.remove !== 200);
  });

  it("are refused with 422 when there are none, too many, or of a type this service cannot take", async () => {
    const { call } = await setup();
    const many = Array.from({ length: 21 }, () => ({ role: "user", content: "x" }));
    for (const [body, loc, type] of [
      [{ items: [] }, ["body", "items"], "too_short"],
      [{ items: many }, ["body", "items"], "too_long"],
      [{ items: [{ type: "reasoning", summary: [] }] }, ["body", "items", 0, "type"], "value_error"],
      [{ items: [{ role: "robot", content: "x" }] }, ["body", "items", 0, "role"], "enum"],
      [{}, ["body", "items"], "missing"],
    ] as const) {
      const res = await call("alice", "", { json: body });
      expect(res.status, JSON.stringify(body)).toBe(422);
      expect((await res.json()).detail[0]).toMatchObject({ loc, type });
    }
    const include = await call("alice", "?include[]=message.input_image.image_url", {
      json: { items: [{ role: "user", content: "x" }] },
    });
    expect(include.status).toBe(422);
  });

  it("cannot be added to a conversation that is gone", async () => {
    const { key, conversation, call } = await setup();
    await stack.call(key.secret, `${CONV}/${conversation.id}`, { method: "DELETE", user: "alice" });
    const add = await call("alice", "", { json: { items: [{ role: "user", content: "x" }] } });
    expect(add.status).toBe(404);
  });

  it("need conversations:write to change them and conversations:read to read them", async () => {
    const { key, conversation, list } = await setup();
    const [first] = await list();
    const readOnly = await stack.createKey({ org: key.org, permissions: ["conversations:read"] });
    const path = `${CONV}/${conversation.id}/items`;
    const as = (suffix: string, init: { method?: string; json?: unknown } = {}) =>
      stack.call(readOnly.secret, `${path}${suffix}`, { ...init, user: "alice" });
    expect((await as("", { json: { items: [{ role: "user", content: "x" }] } })).status).toBe(403);
    expect((await as(`/${first.id}`, { method: "DELETE" })).status).toBe(403);
    expect((await as(`/${first.id}`)).status).toBe(200);
  });
});

describe("updating a conversation", () => {
  it("with metadata null clears it, as OpenAI's update does", async () => {
    const key = await stack.createKey();
    const created = await (
      await stack.call(key.secret, CONV, { json: { metadata: { a: "1" } }, user: "alice" })
    ).json();
    const res = await stack.call(key.secret, `${CONV}/${created.id}`, {
      json: { metadata: null },
      user: "alice",
    });
    expect(res.status).toBe(200);
    expect((await res.json()).metadata).toEqual({});
  });
});
