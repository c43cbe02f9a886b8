import type { Postgres } from "@gw/core/postgres";
import { REDIS_TOPOLOGIES } from "@gw/test-kit";
import { describe, expect, it } from "vitest";
import { ConversationStore } from "../src/conversations/store.ts";
import type { Item } from "../src/items/items.ts";
import { useStack } from "./stack.ts";

const MAX_ITEMS = 4;

interface PlanNode {
  "Node Type": string;
  "Relation Name"?: string;
  "Actual Rows": number;
  "Actual Loops": number;
  Plans?: PlanNode[];
}
const nodes = (node: PlanNode): PlanNode[] => [node, ...(node.Plans ?? []).flatMap(nodes)];
describe.each(REDIS_TOPOLOGIES)("on %s Redis", (topology) => {
  const stack = useStack(
    { LLM_CONTEXT_MAX_ITEMS: String(MAX_ITEMS), LLM_CONTEXT_MAX_TOKENS: "100" },
    {},
    undefined,
    topology,
  );

  const item = (i: number, text: string): Item => ({
    type: "message",
    id: `msg_${i}`,
    status: "completed",
    role: i % 2 === 0 ? "user" : "assistant",
    content: [{ type: i % 2 === 0 ? "input_text" : "output_text", text }],
  });

  /** A conversation of alice's, `items` stored in it, and a way to take a turn in it. */
  async function conversation(items: Item[] = []) {
    const key = await stack.createKey();
    const created = await stack.call(key.secret, "/api/v1/llm/conversations", { json: {}, user: "alice" });
    const { id } = await created.json();
    await new ConversationStore(stack.db).append(key.org, id, items);
    const ask = async (input: string) => {
      const res = await stack.call(key.secret, "/api/v1/llm/responses", {
        json: { input, conversation: id },
        user: "alice",
      });
      expect(res.status).toBe(200);
      return stack.llm.requests.at(-1)!.body.messages.map((m) => `${m.role}: ${m.content}`);
    };
    return { id, org: key.org, ask };
  }

  describe("the context sent with a conversation's turn", () => {
    it("holds the newest LLM_CONTEXT_MAX_ITEMS earlier items", async () => {
      const { ask } = await conversation();
      for (const q of ["q1", "q2", "q3"]) await ask(q);
      expect(await ask("q4")).toEqual([
        "user: q2",
        "assistant: Echo: q2",
        "user: q3",
        "assistant: Echo: q3",
        "user: q4",
      ]);
    });

    it("holds only the newest items that fit LLM_CONTEXT_MAX_TOKENS with the new input, whole", async () => {
      // 100 tokens are about 400 characters: "next" and three of these (120 each) fit, a fourth does not.
      const { ask } = await conversation(Array.from({ length: 6 }, (_, i) => item(i, `${i}`.repeat(120))));
      expect(await ask("next")).toEqual([
        `assistant: ${"3".repeat(120)}`,
        `user: ${"4".repeat(120)}`,
        `assistant: ${"5".repeat(120)}`,
        "user: next",
      ]);
    });

    it("reads from PostgreSQL only the items it sends, along the primary key, however long the conversation", async () => {
      const { id, org, ask } = await conversation(Array.from({ length: 2_000 }, (_, i) => item(i, `m${i}`)));
      expect(await ask("last")).toHaveLength(MAX_ITEMS + 1);
      // The turn's read, made again through a store that keeps the statements it sends…
      const sent: { text: string; values?: unknown[] }[] = [];
      const recording = Object.create(stack.db) as Postgres;
      recording.query = (text: string, values?: unknown[]) => {
        sent.push({ text, values });
        return stack.db.query(text, values);
      };
      const pages = new ConversationStore(recording).newestFirst(org, id, MAX_ITEMS);
      expect((await pages.next()).value?.items).toHaveLength(MAX_ITEMS);
      expect(sent).toHaveLength(1);
      // …then explained as PostgreSQL runs it: no scan of the whole table, only one page of rows touched.
      const { rows } = await stack.db.query<{ "QUERY PLAN": [{ Plan: PlanNode }] }>(
        `EXPLAIN (ANALYZE, FORMAT JSON) ${sent[0]!.text}`,
        sent[0]!.values,
      );
      const scans = nodes(rows[0]!["QUERY PLAN"][0].Plan).filter(
        (n) => n["Relation Name"] === "conversation_items",
      );
      expect(scans.length).toBeGreaterThan(0);
      for (const scan of scans) {
        expect(scan["Node Type"]).not.toBe("Seq Scan");
        expect(scan["Actual Rows"] * scan["Actual Loops"]).toBeLessThanOrEqual(MAX_ITEMS + 1);
      }
    });
  });
});
