import { systemClock } from "@gw/core/clock";
import { scanKeys } from "@gw/test-kit";
import { describe, expect, it } from "vitest";
import { llmError, useStack } from "../../../test/stack.ts";
import type { Item } from "../../items/items.ts";
import { ConversationStore } from "../store.ts";

// Conversations live in PostgreSQL: the Redis topology is not what these tests are about.
describe.each(["single"] as const)("on %s Redis", (topology) => {
  const stack = useStack({}, {}, undefined, topology);
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
      if (expected.get === 404) expect(await get.json()).toEqual(llmError("not_found"));
      if (expected.update === 403) expect((await update.json()).error.code).toBe("forbidden");
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
      expect(await del.json()).toEqual({
        id: conversation.id,
        object: "conversation.deleted",
        deleted: true,
      });
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

    it("are created with an empty list of items (as the Agents SDK's sessions do), but not with 21", async () => {
      const key = await stack.createKey();
      const empty = await stack.call(key.secret, CONV, { json: { items: [] }, user: "alice" });
      expect(empty.status).toBe(200);
      const { id } = await empty.json();
      const items = await stack.call(key.secret, `${CONV}/${id}/items`, { user: "alice" });
      expect(await items.json()).toMatchObject({ object: "list", data: [], has_more: false });
      const many = Array.from({ length: 21 }, () => ({ role: "user", content: "x" }));
      const tooMany = await stack.call(key.secret, CONV, { json: { items: many }, user: "alice" });
      expect(tooMany.status).toBe(422);
      expect((await tooMany.json()).detail[0]).toMatchObject({ loc: ["body", "items"], type: "too_long" });
    });

    it("needs conversations:write to create and conversations:read to read", async () => {
      const readOnly = await stack.createKey({ permissions: ["conversations:read"] });
      const res = await stack.call(readOnly.secret, CONV, { json: {}, user: "alice" });
      expect(res.status).toBe(403);
      expect((await res.json()).error.message).toContain("conversations:write");
    });
  });

  const message = (i: number): Item => ({
    type: "message",
    id: `msg_${String(i).padStart(4, "0")}`,
    status: "completed",
    role: i % 2 === 0 ? "user" : "assistant",
    content: [{ type: i % 2 === 0 ? "input_text" : "output_text", text: `message ${i}` }],
  });

  describe("conversation items", () => {
    /** A conversation of alice's holding `n` items, and a way to list them. */
    async function withItems(n: number) {
      const { key, conversation } = await setup();
      const items = Array.from({ length: n }, (_, i) => message(i));
      await new ConversationStore(stack.db, { clock: systemClock }).append(key.org, conversation.id, items);
      const list = (query = "") =>
        stack.call(key.secret, `${CONV}/${conversation.id}/items${query}`, { user: "alice" });
      return { key, conversation, ids: items.map((i) => i.id), list };
    }

    const page = async (res: Response) => {
      expect(res.status).toBe(200);
      const body = await res.json();
      expect(body).toEqual({
        object: "list",
        data: expect.any(Array),
        first_id: body.data[0]?.id ?? null,
        last_id: body.data.at(-1)?.id ?? null,
        has_more: expect.any(Boolean),
      });
      return {
        ids: body.data.map((i: Item) => i.id) as string[],
        hasMore: body.has_more as boolean,
      };
    };

    it("are paged as OpenAI pages them: newest first, 20 at a time, then after the last one", async () => {
      const { ids, list } = await withItems(25);
      const newest = [...ids].reverse();
      const first = await page(await list());
      expect(first).toEqual({ ids: newest.slice(0, 20), hasMore: true });
      expect(await page(await list(`?after=${first.ids.at(-1)}`))).toEqual({
        ids: newest.slice(20),
        hasMore: false,
      });
      expect(await page(await list("?limit=100"))).toEqual({ ids: newest, hasMore: false });
    });

    it("are paged oldest first with order=asc, and a page's items are whole", async () => {
      const { ids, list } = await withItems(25);
      const seen: string[] = [];
      let after = "";
      for (let more = true; more; ) {
        const next = await page(await list(`?order=asc&limit=10${after}`));
        seen.push(...next.ids);
        more = next.hasMore;
        after = `&after=${next.ids.at(-1)}`;
      }
      expect(seen).toEqual(ids);
      const [item] = (await (await list("?order=asc&limit=1")).json()).data;
      expect(item).toEqual(message(0));
    });

    it.each([
      ["limit=0", "limit", "greater_than_equal"],
      ["limit=101", "limit", "less_than_equal"],
      ["limit=ten", "limit", "int_type"],
      ["limit=2.5", "limit", "int_type"],
      ["limit=-1", "limit", "greater_than_equal"],
      ["order=newest", "order", "enum"],
      ["after=", "after", "string_too_short"],
      ["after=msg_not_here", "after", "value_error"],
    ])("?%s → 422 at query.%s (%s)", async (query, field, type) => {
      const { list } = await withItems(3);
      const res = await list(`?${query}`);
      expect(res.status).toBe(422);
      const { detail } = await res.json();
      expect(detail).toEqual([expect.objectContaining({ loc: ["query", field], type })]);
      expect(String(detail[0].input)).toBe(query.slice(query.indexOf("=") + 1)); // what was sent, not NaN
    });

    it("live in PostgreSQL, not Redis, are continued in order, and leave no row once deleted", async () => {
      const { key, conversation } = await setup();
      await new ConversationStore(stack.db, { clock: systemClock }).append(key.org, conversation.id, [
        message(0),
        message(1),
      ]);
      const rows = async () =>
        (
          await stack.db.query<{ n: string }>(
            `SELECT (SELECT count(*) FROM conversations WHERE org = $1 AND id = $2)
                  + (SELECT count(*) FROM conversation_items WHERE org = $1 AND conversation_id = $2) AS n`,
            [key.org, conversation.id],
          )
        ).rows[0]!.n;
      expect(await rows()).toBe("3");
      expect(await scanKeys(stack.redis, "gw:conv*")).toEqual([]);

      const turn = await stack.call(key.secret, "/api/v1/llm/responses", {
        json: { input: "and now?", conversation: conversation.id },
        user: "alice",
      });
      expect(turn.status).toBe(200);
      expect(stack.llm.requests.at(-1)!.body.messages.map((m) => m.content)).toEqual([
        "message 0",
        "message 1",
        "and now?",
      ]);
      const listed = await stack.call(key.secret, `${CONV}/${conversation.id}/items?order=asc`, {
        user: "alice",
      });
      expect((await listed.json()).data.map((i: Item) => i.id)).toEqual([
        "msg_0000",
        "msg_0001",
        expect.stringMatching(/^msg_/),
        expect.stringMatching(/^msg_/),
      ]);
      expect(await rows()).toBe("5");
      await stack.call(key.secret, `${CONV}/${conversation.id}`, { method: "DELETE", user: "alice" });
      expect(await rows()).toBe("0");
    });
  });
});
