import { systemClock } from "@gw/core/clock";
import type { Postgres } from "@gw/core/postgres";
import { describe, expect, it } from "vitest";
import { llmError, useStack } from "../../../test/stack.ts";
import { ConversationStore } from "../../conversations/store.ts";
import { ResponseStore } from "../store.ts";

const stack = useStack();
const RESPONSES = "/api/v1/llm/responses";
const CONVERSATIONS = "/api/v1/llm/conversations";

const upstreamMessages = () => stack.llm.requests.at(-1)!.body.messages;

/** alice's stored response on a fresh key, and calls as any user of that key. */
async function setup() {
  const key = await stack.createKey();
  const as = (user: string, secret = key.secret) => ({
    create: async (json: unknown) => {
      const res = await stack.call(secret, RESPONSES, { json, user });
      return { status: res.status, body: await res.json() };
    },
    grant: (resourceType: string, resourceId: string, userId: string) =>
      stack.call(secret, "/api/v1/authorization/llm/grant", {
        json: { resourceType, resourceId, userId, role: "reader" },
        user,
      }),
  });
  const first = await as("alice").create({ input: "my secret plan" });
  expect(first.status).toBe(200);
  return { key, as, first: first.body };
}

const ref = (id: string) => ({ type: "item_reference", id });

/** A conversation of alice's holding one message, and that message's id. */
async function aliceConversation(secret: string, text: string) {
  const created = await stack.call(secret, CONVERSATIONS, {
    json: { items: [{ role: "user", content: text }] },
    user: "alice",
  });
  const conversation = (await created.json()) as { id: string };
  const page = await stack.call(secret, `${CONVERSATIONS}/${conversation.id}/items`, { user: "alice" });
  return { conversation, itemId: (await page.json()).data[0].id as string };
}

describe("item_reference input items", () => {
  it("resolve to the owner's own stored items: a response's output and its input, copied with new ids", async () => {
    const { key, as, first } = await setup();
    const answer = first.output[0].id;
    const inputItems = await (
      await stack.call(key.secret, `${RESPONSES}/${first.id}/input_items`, { user: "alice" })
    ).json();
    const question = inputItems.data[0].id;
    const next = await as("alice").create({
      input: [ref(question), ref(answer), { role: "user", content: "and then?" }],
    });
    expect(next.status).toBe(200);
    expect(upstreamMessages()).toEqual([
      { role: "user", content: "my secret plan" },
      { role: "assistant", content: "Echo: my secret plan" },
      { role: "user", content: "and then?" },
    ]);
    const copied = await (
      await stack.call(key.secret, `${RESPONSES}/${next.body.id}/input_items?order=asc`, { user: "alice" })
    ).json();
    expect(copied.data).toMatchObject([
      { type: "message", role: "user", content: [{ text: "my secret plan" }] },
      { type: "message", role: "assistant", content: [{ text: "Echo: my secret plan" }] },
      { type: "message", role: "user" },
    ]);
    expect(copied.data.map((i: { id: string }) => i.id)).not.toContain(answer);
    expect(copied.data.map((i: { id: string }) => i.id)).not.toContain(question);
  });

  it("is 404 for a reader of nothing, another organization and an unknown id alike; reader on the response lets it through", async () => {
    const { as, first } = await setup();
    const answer = first.output[0].id;
    const outsider = await stack.createKey();
    const before = stack.llm.requests.length;
    for (const [who, id] of [
      [as("bob"), answer],
      [as("alice", outsider.secret), answer],
      [as("alice"), "msg_0000000000000000000000000000dead"],
    ] as const) {
      const refused = await who.create({ input: [ref(id), { role: "user", content: "tell me" }] });
      expect(refused.status).toBe(404);
      expect(refused.body).toEqual(llmError("not_found", `No item ${id}`, "input"));
    }
    expect(stack.llm.requests.length).toBe(before);

    expect((await as("alice").grant("response", first.id, "bob")).status).toBe(204);
    const granted = await as("bob").create({ input: [ref(answer), { role: "user", content: "tell me" }] });
    expect(granted.status).toBe(200);
    expect(upstreamMessages()[0]).toEqual({ role: "assistant", content: "Echo: my secret plan" });
  });

  it("resolves a conversation's item for a reader of the conversation only, and nothing once it is deleted", async () => {
    const { key, as } = await setup();
    const { conversation, itemId } = await aliceConversation(key.secret, "I like trains.");
    const input = [ref(itemId), { role: "user", content: "so?" }];
    expect((await as("bob").create({ input })).status).toBe(404);
    expect((await as("alice").grant("conversation", conversation.id, "bob")).status).toBe(204);
    expect((await as("bob").create({ input })).status).toBe(200);
    expect(upstreamMessages()[0]).toEqual({ role: "user", content: "I like trains." });

    await stack.call(key.secret, `${CONVERSATIONS}/${conversation.id}`, { method: "DELETE", user: "alice" });
    expect((await as("alice").create({ input })).status).toBe(404);
  });

  it("finds nothing of a deleted response", async () => {
    const { key, as, first } = await setup();
    await stack.call(key.secret, `${RESPONSES}/${first.id}`, { method: "DELETE", user: "alice" });
    const gone = await as("alice").create({
      input: [ref(first.output[0].id), { role: "user", content: "x" }],
    });
    expect(gone.status).toBe(404);
  });

  it("finds the item's response or conversation in PostgreSQL along an index on (org, item id)", async () => {
    const { key, first } = await setup();
    const { conversation, itemId: conversationItem } = await aliceConversation(key.secret, "kept");
    const answer = first.output[0].id as string;

    // The stores' lookups, made through a pool that keeps the statements it sends…
    const sent: { text: string; values?: unknown[] }[] = [];
    const recording = Object.create(stack.db) as Postgres;
    recording.query = (text: string, values?: unknown[]) => {
      sent.push({ text, values });
      return stack.db.query(text, values);
    };
    const [responses, conversations] = [
      new ResponseStore(recording, { clock: systemClock }),
      new ConversationStore(recording, { clock: systemClock }),
    ];
    expect(await responses.findItem(key.org, answer)).toEqual({
      responseId: first.id,
      item: first.output[0],
    });
    expect(await conversations.findItem(key.org, conversationItem)).toEqual({
      conversationId: conversation.id,
      item: expect.objectContaining({
        id: conversationItem,
        content: [{ type: "input_text", text: "kept" }],
      }),
    });
    // Another organization's id, or an item of the other kind, is nowhere.
    expect(await responses.findItem("org-elsewhere", answer)).toBeUndefined();
    expect(await conversations.findItem("org-elsewhere", conversationItem)).toBeUndefined();
    expect(await responses.findItem(key.org, conversationItem)).toBeUndefined();
    expect(await conversations.findItem(key.org, answer)).toBeUndefined();

    // …then explained as PostgreSQL plans them when it may neither scan whole tables nor take another index
    // of the table (dropped in a transaction that is rolled back: on tables this small the planner may pick
    // any index whose first column is org), so the plan shows whether the index on (org, item id) serves it.
    const indexOf = async (
      { text, values }: (typeof sent)[number],
      table: string,
      index: string,
      column: string,
    ) => {
      let scans: (string | undefined)[] = [];
      await stack.db
        .transaction(async (tx) => {
          await tx.query("SET LOCAL enable_seqscan = off");
          const others = await tx.query<{ indexname: string }>(
            "SELECT indexname FROM pg_indexes WHERE tablename = $1 AND indexname <> $2 ORDER BY indexname",
            [table, index],
          );
          for (const { indexname } of others.rows) {
            const constraint = await tx.query("SELECT 1 FROM pg_constraint WHERE conname = $1", [indexname]);
            await tx.query(
              constraint.rows.length > 0
                ? `ALTER TABLE "${table}" DROP CONSTRAINT "${indexname}" CASCADE`
                : `DROP INDEX "${indexname}" CASCADE`,
            );
          }
          const { rows } = await tx.query<{ "QUERY PLAN": [{ Plan: PlanNode }] }>(
            `EXPLAIN (FORMAT JSON) ${text}`,
            values,
          );
          scans = nodes(rows[0]!["QUERY PLAN"][0].Plan)
            .filter((n) => n["Relation Name"] === table)
            .map((n) => (n["Index Cond"]?.includes(`${column} =`) ? n["Index Name"] : n["Node Type"]));
          throw ROLLBACK;
        })
        .catch((err: unknown) => {
          if (err !== ROLLBACK) throw err;
        });
      return scans;
    };
    expect(await indexOf(sent[0]!, "response_items", "response_items_pkey", "item_id")).toEqual([
      "response_items_pkey",
    ]);
    expect(await indexOf(sent[1]!, "conversation_items", "conversation_items_by_id", "id")).toEqual([
      "conversation_items_by_id",
    ]);
  });
});

interface PlanNode {
  "Node Type": string;
  "Relation Name"?: string;
  "Index Name"?: string;
  "Index Cond"?: string;
  Plans?: PlanNode[];
}
/** Thrown to roll the transaction back. */
const ROLLBACK = Symbol("rollback");
const nodes = (node: PlanNode): PlanNode[] => [node, ...(node.Plans ?? []).flatMap(nodes)];
