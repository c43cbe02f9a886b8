import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { RedisConsistencyTokens, SpiceDBClient, scopedId } from "@gw/core/authz";
import { ManualClock } from "@gw/core/clock";
import { createLogger } from "@gw/core/logger";
import { readRelationshipLines } from "@gw/test-kit";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { ids, issuedAt } from "../src/ids.ts";
import { OrphanReconciler, RECONCILED_CONTENT } from "../src/retention/reconciler.ts";
import { testProvider } from "./providers.ts";
import { parseEvents, useStack } from "./stack.ts";

const CONV = "/api/v1/llm/conversations";
const RESPONSES = "/api/v1/llm/responses";
const COMPLETIONS = "/api/v1/llm/chat/completions";
const HOUR = 3_600_000;
const DAY = 24 * HOUR;

/**
 * The service's one clock, passed in where it is wired: it stands still until
 * a test moves it, a week and some ahead of the system's time (SpiceDB ends
 * owners' relationships on its real clock: the service's may run ahead of it,
 * never behind). Whatever the service stamps from the system's time shows.
 */
const clock = new ManualClock(0, Date.now() + 7 * DAY + 12_345);
// The service's own reconciler stays out of the way (this file runs one on the same clock).
const stack = useStack({ ORPHAN_RECONCILE_INTERVAL: "1h" }, {}, undefined, "single", { clock });

const seconds = (ms: number) => Math.floor(ms / 1000);
/** The time of issue an id carries, read as the orphan reconciler reads it: on the service's clock. */
const stamp = (id: string) => issuedAt(id, clock.wall());

async function post(secret: string, path: string, json: unknown) {
  const res = await stack.call(secret, path, { json, user: "alice" });
  expect(res.status).toBe(200);
  return res.json();
}

describe("the service reads time from the one clock it is given", () => {
  it("stamps ids, created_at, completed_at and created with the clock's time, not the system's", async () => {
    const { secret } = await stack.createKey();
    const first = clock.wall();
    expect(first - Date.now()).toBeGreaterThan(DAY); // the two clocks are days apart

    const conversation = await post(secret, CONV, { items: [{ role: "user", content: "hello" }] });
    expect(conversation.created_at).toBe(seconds(first));
    expect(stamp(conversation.id)).toBe(first);
    const listed = await (
      await stack.call(secret, `${CONV}/${conversation.id}/items`, { user: "alice" })
    ).json();
    expect(listed.data.map((i: { id: string }) => stamp(i.id))).toEqual([first]);

    // Time moves when the clock does, and only then.
    clock.advance(90_000);
    const now = clock.wall();
    const added = await post(secret, `${CONV}/${conversation.id}/items`, {
      items: [{ role: "user", content: "again" }],
    });
    expect(added.data.map((i: { id: string }) => stamp(i.id))).toEqual([now]);

    const completion = await post(secret, COMPLETIONS, {
      messages: [{ role: "user", content: "hi" }],
      store: true,
    });
    expect(completion.id).toMatch(/^chatcmpl-[0-9a-f]{32}$/);
    expect(completion.created).toBe(seconds(now));
    expect(stamp(completion.id)).toBe(now);

    const streamed = await stack.call(secret, RESPONSES, {
      json: { input: "hi", stream: true },
      user: "alice",
    });
    expect(streamed.status).toBe(200);
    const done = parseEvents(await streamed.text()).find((e) => e.type === "response.completed")!.data
      .response;
    expect([done.created_at, done.completed_at]).toEqual([seconds(now), seconds(now)]);
    expect([done.id, ...done.output.map((o: { id: string }) => o.id)].map(stamp)).toEqual([now, now]);
  });

  it("a response is created at the clock's time when asked and completed at its time when the model answers", async () => {
    const { secret } = await stack.createKey();
    const asked = clock.wall();
    stack.llm.mode = "hold";
    let pending: Promise<Response>;
    try {
      pending = stack.call(secret, RESPONSES, { json: { input: "slow", store: true }, user: "alice" });
      // The provider has the request: the response is drafted; then the model takes 42 s by the clock.
      await vi.waitFor(() =>
        expect(stack.llm.requests.some((r) => r.body.messages.at(-1)?.content === "slow")).toBe(true),
      );
      clock.advance(42_000);
    } finally {
      stack.llm.release();
    }
    const res = await pending;
    expect(res.status).toBe(200);
    const response = await res.json();
    expect(response.id).toMatch(/^resp_[0-9a-f]{32}$/);
    expect(stamp(response.id)).toBe(asked);
    expect(response.created_at).toBe(seconds(asked));
    expect(response.completed_at).toBe(seconds(asked + 42_000));
    expect(response.output.map((o: { id: string }) => stamp(o.id))).toEqual([asked + 42_000]);
  });

  describe("the orphan reconciler, on the same clock", () => {
    let reconciler: OrphanReconciler;
    let spicedb: SpiceDBClient;
    beforeAll(() => {
      spicedb = new SpiceDBClient({
        endpoint: stack.spicedb.endpoint,
        presharedKey: stack.spicedb.presharedKey,
        insecure: true,
        deadlineMs: 5_000,
      });
      reconciler = new OrphanReconciler({
        db: stack.db,
        redis: stack.redis,
        spicedb,
        tokens: new RedisConsistencyTokens(stack.redis, 0),
        logger: createLogger("service-clock-test", "silent"),
        clock,
        options: { intervalMs: HOUR, batch: 100, graceMs: HOUR },
      });
    });
    afterAll(() => spicedb?.close());

    /** Runs until every service-issued type has been scanned to its end once. */
    async function fullPass() {
      const wrapped = new Set<string>();
      while (wrapped.size < RECONCILED_CONTENT.length) {
        const report = await reconciler.reconcile();
        if (!report) throw new Error("another replica holds the lock");
        if (report.wrapped) wrapped.add(report.type);
      }
    }

    it("leaves alone what the service issued less than the grace ago by that clock, then removes it", async () => {
      const { secret, org } = await stack.createKey();
      const { id } = await post(secret, CONV, {});
      // Its row is gone, its owner relationship stays: as a create still writing (or one that died) leaves it.
      await stack.db.query("DELETE FROM conversations WHERE org = $1 AND id = $2", [org, id]);
      const lines = () =>
        readRelationshipLines(stack.spicedb, {
          resourceType: "conversation",
          optionalResourceId: scopedId(org, id),
        });
      expect(await lines()).toContain(`owner ${org}/alice`);

      await fullPass();
      expect(await lines()).toContain(`owner ${org}/alice`); // issued just now by the clock: maybe still being created
      clock.advance(HOUR - 1_000);
      await fullPass();
      expect(await lines()).toContain(`owner ${org}/alice`);
      clock.advance(1_000);
      await fullPass();
      expect(await lines()).toEqual([]);
    });
  });

  it("the provider stamps the ids of tool calls it was sent without one from the clock it is given", async () => {
    // A provider that leaves out its tool calls' ids, as some OpenAI-compatible ones do.
    const call = { type: "function", function: { name: "lookup", arguments: "{}" } };
    const server = createServer((req, res) => {
      let raw = "";
      req.on("data", (chunk) => {
        raw += chunk;
      });
      req.on("end", () => {
        if (!JSON.parse(raw).stream) {
          res.writeHead(200, { "content-type": "application/json" }).end(
            JSON.stringify({
              model: "m",
              choices: [{ message: { content: null, tool_calls: [call] }, finish_reason: "tool_calls" }],
              usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 },
            }),
          );
          return;
        }
        const event = (data: unknown) => `data: ${JSON.stringify(data)}\n\n`;
        res.writeHead(200, { "content-type": "text/event-stream" });
        res.end(
          event({ model: "m", choices: [{ delta: { tool_calls: [{ index: 0, ...call }] } }] }) +
            event({ model: "m", choices: [{ delta: {}, finish_reason: "tool_calls" }] }) +
            "data: [DONE]\n\n",
        );
      });
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    try {
      const provider = testProvider({
        baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`,
        apiKey: undefined,
        defaultModel: "m",
        timeoutMs: 5_000,
        ids: ids(clock),
      });
      const request = { model: "m", messages: [{ role: "user" as const, content: "hi" }] };
      const now = clock.wall();
      const answered = await provider.complete(request, new AbortController().signal);
      expect(answered.toolCalls.map((c) => c.id)).toEqual([expect.stringMatching(/^call_[0-9a-f]{32}$/)]);
      expect(stamp(answered.toolCalls[0]!.id)).toBe(now);

      clock.advance(5_000);
      const pieces = provider.stream(request, new AbortController().signal);
      let next = await pieces.next();
      while (!next.done) next = await pieces.next();
      expect(next.value.toolCalls.map((c) => stamp(c.id))).toEqual([now + 5_000]);
    } finally {
      await new Promise((r) => server.close(r));
    }
  });
});
