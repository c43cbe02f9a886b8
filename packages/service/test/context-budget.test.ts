import { monitorCommands, REDIS_TOPOLOGIES } from "@gw/devstack/testing";
import { describe, expect, it } from "vitest";
import { ConversationStore } from "../src/conversations/store.ts";
import type { Item } from "../src/items/items.ts";
import { useStack } from "./stack.ts";

const MAX_ITEMS = 4;
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
    await new ConversationStore(stack.redis).append(key.org, id, items);
    const ask = async (input: string) => {
      const res = await stack.call(key.secret, "/api/v1/llm/responses", {
        json: { input, conversation: id },
        user: "alice",
      });
      expect(res.status).toBe(200);
      return stack.llm.requests.at(-1)!.body.messages.map((m) => `${m.role}: ${m.content}`);
    };
    return { id, ask };
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

    it("reads from Redis only the items it sends, however long the conversation", async () => {
      const { id, ask } = await conversation(Array.from({ length: 2_000 }, (_, i) => item(i, `m${i}`)));
      const monitor = await monitorCommands(stack.redisServer);
      try {
        expect(await ask("last")).toHaveLength(MAX_ITEMS + 1);
      } finally {
        await monitor.stop();
      }
      const commands = monitor.commands.filter((args) => args.some((a) => a.includes(id)));
      const reads = commands.filter(([name]) => /^(l|z|zrev)range|^h(get|mget|getall|vals)$/.test(name!));
      expect(reads.length).toBeGreaterThan(0);
      for (const [name, , start, stop] of reads) {
        expect(name).not.toMatch(/getall|vals/);
        if (/range$/.test(name!)) expect(Number(stop) - Number(start)).toBeLessThanOrEqual(MAX_ITEMS);
      }
      const fetched = reads.filter(([name]) => name === "hmget").reduce((n, args) => n + args.length - 2, 0);
      expect(fetched).toBeLessThanOrEqual(MAX_ITEMS + 1);
    });
  });
});
