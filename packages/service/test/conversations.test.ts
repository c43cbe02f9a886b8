import { describe, expect, it } from "vitest";
import { useStack } from "./stack.ts";

const stack = useStack();
const CONV = "/api/v1/llm/conversations";

async function setup() {
  const key = await stack.createKey();
  const created = await stack.call(key.secret, CONV, {
    json: { metadata: { topic: "billing" } },
    user: "alice",
  });
  expect(created.status).toBe(200);
  const conversation = await created.json();
  const grant = (userId: string, role: string) =>
    stack.call(key.secret, "/api/v1/authorization/llm/grant", {
      json: { resourceType: "conversation", resourceId: conversation.id, userId, role },
      user: "alice",
    });
  return { key, conversation, grant };
}

describe("conversations", () => {
  it("are created with the shape of the contract, and the creator (X-On-Behalf-Of) owns them", async () => {
    const { key, conversation } = await setup();
    expect(conversation).toEqual({
      id: expect.stringMatching(/^conv_[0-9a-f]{32}$/),
      object: "conversation",
      created_at: expect.any(Number),
      metadata: { topic: "billing" },
    });
    const check = await stack.call(
      key.secret,
      `/api/v1/authorization/llm/check?resourceType=conversation&resourceId=${conversation.id}&role=owner`,
      { user: "alice" },
    );
    expect(await check.json()).toEqual({ allowed: true });
    // The key's own owner did not create it.
    const asBackend = await stack.call(
      key.secret,
      `/api/v1/authorization/llm/check?resourceType=conversation&resourceId=${conversation.id}&role=reader`,
    );
    expect(await asBackend.json()).toEqual({ allowed: false });
  });

  it.each([
    ["owner", "alice", { get: 200, update: 200, items: 200, delete: 200 }],
    ["writer", "wendy", { get: 200, update: 200, items: 200, delete: 403 }],
    ["reader", "rita", { get: 200, update: 403, items: 200, delete: 403 }],
    ["no role", "nobody", { get: 404, update: 404, items: 404, delete: 404 }],
  ] as const)("as %s: read, update, items, delete", async (role, user, expected) => {
    const { key, conversation, grant } = await setup();
    if (role === "writer" || role === "reader") expect((await grant(user, role)).status).toBe(204);
    const path = `${CONV}/${conversation.id}`;
    const get = await stack.call(key.secret, path, { user });
    const update = await stack.call(key.secret, path, { json: { metadata: { topic: "new" } }, user });
    const items = await stack.call(key.secret, `${path}/items`, { user });
    const del = await stack.call(key.secret, path, { method: "DELETE", user });
    expect({ get: get.status, update: update.status, items: items.status, delete: del.status }).toEqual(
      expected,
    );
    if (expected.get === 404)
      expect(await get.json()).toEqual({ error: "Not Found", message: expect.any(String) });
    if (expected.update === 403) expect((await update.json()).error).toBe("Forbidden");
    if (expected.update === 200) expect((await update.json()).metadata).toEqual({ topic: "new" });
    if (expected.items === 200)
      expect(await items.json()).toMatchObject({ object: "list", data: [], has_more: false });
  });

  it("delete removes the conversation and its relationships", async () => {
    const { key, conversation, grant } = await setup();
    await grant("rita", "reader");
    const del = await stack.call(key.secret, `${CONV}/${conversation.id}`, {
      method: "DELETE",
      user: "alice",
    });
    expect(await del.json()).toEqual({ id: conversation.id, object: "conversation.deleted", deleted: true });
    for (const user of ["alice", "rita"]) {
      expect((await stack.call(key.secret, `${CONV}/${conversation.id}`, { user })).status).toBe(404);
      const check = await stack.call(
        key.secret,
        `/api/v1/authorization/llm/check?resourceType=conversation&resourceId=${conversation.id}&role=reader`,
        { user },
      );
      expect(await check.json()).toEqual({ allowed: false });
    }
  });

  it("another organization cannot see it, even with the same user name", async () => {
    const { conversation } = await setup();
    const other = await stack.createKey();
    expect((await stack.call(other.secret, `${CONV}/${conversation.id}`, { user: "alice" })).status).toBe(
      404,
    );
  });

  it.each([
    [
      { metadata: Object.fromEntries(Array.from({ length: 17 }, (_, i) => [`k${i}`, "v"])) },
      ["body", "metadata"],
    ],
    [{ metadata: { ["k".repeat(65)]: "v" } }, ["body", "metadata", "k".repeat(65)]],
    [{ metadata: { k: "v".repeat(513) } }, ["body", "metadata", "k"]],
    [{ metadata: { k: 5 } }, ["body", "metadata", "k"]],
    [{ title: "x" }, ["body", "title"]],
  ])("validates metadata: %j → 422 at %j", async (body, loc) => {
    const key = await stack.createKey();
    const res = await stack.call(key.secret, CONV, { json: body, user: "alice" });
    expect(res.status).toBe(422);
    expect((await res.json()).detail).toEqual([expect.objectContaining({ loc })]);
  });

  it("accepts 16 pairs at the size limits, and no body at all", async () => {
    const key = await stack.createKey();
    const metadata = Object.fromEntries(
      Array.from({ length: 16 }, (_, i) => [`${i}`.padEnd(64, "k"), "v".repeat(512)]),
    );
    expect((await stack.call(key.secret, CONV, { json: { metadata }, user: "alice" })).status).toBe(200);
    expect((await stack.call(key.secret, CONV, { method: "POST", user: "alice" })).status).toBe(200);
  });

  it("needs conversations:write to create and conversations:read to read", async () => {
    const readOnly = await stack.createKey({ permissions: ["conversations:read"] });
    const res = await stack.call(readOnly.secret, CONV, { json: {}, user: "alice" });
    expect(res.status).toBe(403);
    expect((await res.json()).message).toContain("conversations:write");
  });
});
