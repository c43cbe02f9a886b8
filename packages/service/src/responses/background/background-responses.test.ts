import { CountingWindows } from "@gw/core/windows";
import { openaiSchemaProblems } from "@gw/test-kit/openai-schemas";
import { Queue } from "bullmq";
import { afterEach, describe, expect, it, vi } from "vitest";
import { llmError, parseEvents, useStack } from "../../../test/stack.ts";
import { BACKGROUND_QUEUE, BACKGROUND_QUEUE_PREFIX } from "./index.ts";

/*
 * Background responses (`background: true`) through gateway and service:
 * queued at once, run by the service's worker through the same turn as a
 * foreground call, cancelled by a writer, streamed and resumed, and bounded
 * per key.
 */
/** The next run to start waits here, once in progress and before its turn, until the test opens it. */
let gate: { reached(id: string): void; open: Promise<void> } | undefined;
const stack = useStack({ BACKGROUND_RESPONSES_PER_KEY: "2" }, {}, undefined, "single", {
  backgroundHooks: {
    async started(id) {
      const held = gate;
      gate = undefined;
      held?.reached(id);
      await held?.open;
    },
  },
});
const RESPONSES = "/api/v1/llm/responses";
const LIMITS = { tokens: { minute: 100_000 } };

const tokensUsed = async (keyId: string) =>
  (await new CountingWindows(stack.redis).peek(keyId, undefined, LIMITS)).find((s) => s.unit === "tokens")!
    .used;
const usageTotals = async (secret: string, user: string) => {
  const day = new Date().toISOString().slice(0, 10);
  return (await (await stack.call(secret, `/api/v1/usage?start=${day}`, { user })).json()).totals;
};

afterEach(() => {
  stack.llm.mode = "ok";
  stack.llm.release();
});

async function created(secret: string, body: Record<string, unknown>, user = "alice") {
  const res = await stack.call(secret, RESPONSES, {
    json: { input: "hello there", background: true, ...body },
    user,
  });
  expect(res.status).toBe(200);
  return res.json();
}

const get = (secret: string, id: string, user = "alice") =>
  stack.call(secret, `${RESPONSES}/${id}`, { user });

/** Polls the response until `expected` holds of it. */
async function until(
  secret: string,
  id: string,
  expected: (r: { status: string }) => boolean,
  user = "alice",
) {
  let last: { status: string } | undefined;
  await vi.waitFor(
    async () => {
      last = await (await get(secret, id, user)).json();
      expect(expected(last!)).toBe(true);
    },
    { timeout: 10_000, interval: 20 },
  );
  return last as Record<string, unknown> & { status: string };
}

/** The fake provider's request count once a new one arrived. */
const providerHas = (count: number) =>
  vi.waitFor(() => expect(stack.llm.requests.length).toBeGreaterThanOrEqual(count), { timeout: 10_000 });

describe("background responses", () => {
  it("answer at once queued, then run to completed as the creator's end user, in OpenAI's shape", async () => {
    const key = await stack.createKey();
    const queued = await created(key.secret, {});
    expect(queued).toMatchObject({ object: "response", status: "queued", background: true, output: [] });
    expect(openaiSchemaProblems("Response", queued)).toEqual([]);
    const done = await until(key.secret, queued.id, (r) => r.status === "completed");
    expect(done).toMatchObject({
      id: queued.id,
      background: true,
      output: [{ type: "message", content: [{ type: "output_text", text: "Echo: hello there" }] }],
    });
    expect(openaiSchemaProblems("Response", done)).toEqual([]);
    // alice owns it: another end user of the same key does not see it.
    expect((await get(key.secret, queued.id, "bob")).status).toBe(404);
    // Its usage is alice's, on this key.
    expect((await usageTotals(key.secret, "alice")).total_tokens).toBe(
      (done.usage as { total_tokens: number }).total_tokens,
    );
    expect((await usageTotals(key.secret, "bob")).total_tokens ?? 0).toBe(0);
    // Its input items were kept with it, and it continues as any stored response.
    const items = await (
      await stack.call(key.secret, `${RESPONSES}/${queued.id}/input_items`, { user: "alice" })
    ).json();
    expect(items.data).toHaveLength(1);
    const next = await stack.call(key.secret, RESPONSES, {
      json: { input: "and then", previous_response_id: queued.id },
      user: "alice",
    });
    expect(next.status).toBe(200);
  });

  it("run with the creator's rights: a previous response only its creator may read", async () => {
    const key = await stack.createKey();
    const first = await (
      await stack.call(key.secret, RESPONSES, { json: { input: "remember blue" }, user: "alice" })
    ).json();
    const queued = await created(key.secret, { previous_response_id: first.id });
    await until(key.secret, queued.id, (r) => r.status === "completed");
    expect(stack.llm.requests.at(-1)?.body.messages.map((m) => m.content)).toContain("remember blue");
    // bob cannot read alice's response, so his background call is refused before it is queued.
    const refused = await stack.call(key.secret, RESPONSES, {
      json: { input: "x", background: true, previous_response_id: first.id },
      user: "bob",
    });
    expect(refused.status).toBe(404);
  });

  it("keep no secret in the queued job", async () => {
    const key = await stack.createKey();
    stack.llm.mode = "hold";
    const queued = await created(key.secret, {});
    const queue = new Queue(BACKGROUND_QUEUE, { connection: stack.redis, prefix: BACKGROUND_QUEUE_PREFIX });
    try {
      const job = await queue.getJob(queued.id);
      expect(job?.data).toMatchObject({
        responseId: queued.id,
        caller: { principal: { keyId: key.id, user: "alice", org: key.org } },
      });
      expect(JSON.stringify(job?.data)).not.toContain(key.secret);
      expect(JSON.stringify(job?.data)).not.toContain("upstream-secret");
    } finally {
      await queue.close();
    }
    stack.llm.release();
    await until(key.secret, queued.id, (r) => r.status === "completed");
  });

  it("run nothing once the creator's key was revoked after they were queued, saying why", async () => {
    const key = await stack.createKey();
    const reached = Promise.withResolvers<string>();
    const open = Promise.withResolvers<void>();
    gate = { reached: reached.resolve, open: open.promise };
    const before = stack.llm.requests.length;
    const queued = await created(key.secret, {});
    expect(await reached.promise).toBe(queued.id);
    await stack.store.revoke(key.id);
    open.resolve();
    const owner = await stack.createKey({ org: key.org });
    const failed = await until(owner.secret, queued.id, (r) => r.status === "failed", "alice");
    expect(failed.error).toMatchObject({ code: "server_error", message: expect.stringMatching(/revoked/) });
    expect(stack.llm.requests.length).toBe(before);
  });

  it("append their turn to the conversation they continue once answered", async () => {
    const key = await stack.createKey();
    const conversation = await (
      await stack.call(key.secret, "/api/v1/llm/conversations", { json: {}, user: "alice" })
    ).json();
    const queued = await created(key.secret, { input: "note this", conversation: conversation.id });
    await until(key.secret, queued.id, (r) => r.status === "completed");
    const items = await (
      await stack.call(key.secret, `/api/v1/llm/conversations/${conversation.id}/items?order=asc`, {
        user: "alice",
      })
    ).json();
    expect(items.data.map((i: { role: string }) => i.role)).toEqual(["user", "assistant"]);
  });

  it("end incomplete when the model stops at max_output_tokens, keeping what it wrote", async () => {
    const key = await stack.createKey();
    const queued = await created(key.secret, { input: "one two three four five six", max_output_tokens: 2 });
    const done = await until(key.secret, queued.id, (r) => r.status === "incomplete");
    expect(done).toMatchObject({
      incomplete_details: { reason: "max_output_tokens" },
      output: [{ type: "message", status: "incomplete" }],
    });
  });

  it("need store: true (400 naming the field)", async () => {
    const key = await stack.createKey();
    const res = await stack.call(key.secret, RESPONSES, {
      json: { input: "x", background: true, store: false },
    });
    expect(res.status).toBe(400);
    expect(await res.json()).toEqual(llmError("bad_request", expect.stringMatching(/store/), "background"));
  });

  it("end failed, saying why, when the provider fails", async () => {
    const key = await stack.createKey();
    stack.llm.mode = "fail";
    stack.llm.failStatus = 400;
    const queued = await created(key.secret, {});
    const failed = await until(key.secret, queued.id, (r) => r.status === "failed");
    expect(failed.error).toMatchObject({ code: "server_error", message: expect.any(String) });
    expect(JSON.stringify(failed)).not.toContain("sk-proj-LEAKED");
  });
});

describe("cancelling a background response", () => {
  it("aborts the provider call, keeps what was produced, and answers cancelled; a finished one stays 400", async () => {
    const key = await stack.createKey({ limits: LIMITS });
    stack.llm.mode = "hold-midstream";
    const before = stack.llm.requests.length;
    const queued = await created(key.secret, { input: "one two three four" });
    await providerHas(before + 1);
    // The first word reached the worker: the response is in progress.
    await until(key.secret, queued.id, (r) => r.status === "in_progress");
    await vi.waitFor(async () => {
      const events = await stack.redis.xrange(`gw:bg:{${queued.id}}:events`, "-", "+");
      expect(events.map(([, f]) => f[1]).join("")).toContain("response.output_text.delta");
    });
    const cancel = await stack.call(key.secret, `${RESPONSES}/${queued.id}/cancel`, {
      method: "POST",
      user: "alice",
    });
    expect(cancel.status).toBe(200);
    // The answer waits for the worker to stop the call: it shows what was produced, and its usage.
    const answered = await cancel.json();
    expect(answered).toMatchObject({
      id: queued.id,
      status: "cancelled",
      output: [{ type: "message", status: "incomplete", content: [{ text: "Echo: " }] }],
      usage: { output_tokens: expect.any(Number) },
    });
    expect(stack.llm.requests.at(-1)?.aborted).toBe(true);
    expect(await (await get(key.secret, queued.id)).json()).toEqual(answered);
    // What was produced is charged to the key, and the response's usage is what was charged: its budget's
    // lease settled at what usage records.
    const totals = await usageTotals(key.secret, "alice");
    expect(totals.output_tokens).toBeGreaterThan(0);
    expect(answered.usage).toMatchObject({
      input_tokens: totals.input_tokens,
      output_tokens: totals.output_tokens,
      total_tokens: totals.total_tokens,
    });
    await vi.waitFor(async () => expect(await tokensUsed(key.id)).toBe(totals.total_tokens));
    // Its stream ends saying so, with the response as kept.
    const events = parseEvents(
      await (await stack.call(key.secret, `${RESPONSES}/${queued.id}?stream=true`, { user: "alice" })).text(),
    );
    expect(events.at(-1)).toMatchObject({ type: "response.cancelled", data: { response: answered } });
    // Ended: cancelling again is today's 400.
    const again = await stack.call(key.secret, `${RESPONSES}/${queued.id}/cancel`, {
      method: "POST",
      user: "alice",
    });
    expect(again.status).toBe(400);
  });

  it("as a reader is 403, as a stranger 404, as its writer 200; a reader may still poll it", async () => {
    const key = await stack.createKey();
    stack.llm.mode = "hold";
    const running = await created(key.secret, {});
    // The provider holds every answer back: both stay unfinished until it is released.
    const queued = await created(key.secret, {});
    const grant = await stack.call(key.secret, "/api/v1/authorization/llm/grant", {
      json: { resourceType: "response", resourceId: queued.id, userId: "carol", role: "reader" },
      user: "alice",
    });
    expect(grant.status).toBe(204);
    const cancelAs = (user: string) =>
      stack.call(key.secret, `${RESPONSES}/${queued.id}/cancel`, { method: "POST", user });
    expect((await cancelAs("carol")).status).toBe(403);
    expect((await cancelAs("bob")).status).toBe(404);
    // A reader may poll it.
    expect((await get(key.secret, queued.id, "carol")).status).toBe(200);
    const cancelled = await cancelAs("alice");
    expect(cancelled.status).toBe(200);
    const answer = await cancelled.json();
    expect(answer.status).toBe("cancelled");
    // Cancelled while queued: it never runs, and its stream (the queue's two events) ends saying so.
    const events = parseEvents(
      await (await stack.call(key.secret, `${RESPONSES}/${queued.id}?stream=true`, { user: "alice" })).text(),
    );
    expect(events.map((e) => e.type)).toEqual(["response.created", "response.queued", "response.cancelled"]);
    expect(events.at(-1)?.data).toMatchObject({ sequence_number: 2, response: answer });
    stack.llm.release();
    await until(key.secret, running.id, (r) => r.status === "completed");
    expect((await (await get(key.secret, queued.id)).json()).status).toBe("cancelled");
  });
});

describe("BACKGROUND_RESPONSES_PER_KEY", () => {
  it("refuses a key's background responses past it with 429 background_limit_exceeded, until one ends", async () => {
    const key = await stack.createKey();
    const other = await stack.createKey();
    stack.llm.mode = "hold";
    const burst = await Promise.all(
      [1, 2, 3, 4].map(() =>
        stack.call(key.secret, RESPONSES, { json: { input: "x", background: true }, user: "alice" }),
      ),
    );
    const statuses = burst.map((r) => r.status).sort();
    expect(statuses).toEqual([200, 200, 429, 429]);
    const refused = burst.find((r) => r.status === 429)!;
    expect(await refused.json()).toEqual(llmError("background_limit_exceeded"));
    // Another key has its own.
    expect(
      (await stack.call(other.secret, RESPONSES, { json: { input: "x", background: true } })).status,
    ).toBe(200);
    const accepted = await Promise.all(burst.filter((r) => r.status === 200).map((r) => r.json()));
    // One ends (cancelled): its slot is given back.
    const cancel = await stack.call(key.secret, `${RESPONSES}/${accepted[0].id}/cancel`, {
      method: "POST",
      user: "alice",
    });
    expect(cancel.status).toBe(200);
    await vi.waitFor(async () => {
      const res = await stack.call(key.secret, RESPONSES, {
        json: { input: "x", background: true },
        user: "alice",
      });
      expect(res.status).toBe(200);
    });
    stack.llm.release();
  });
});

describe("streaming a background response", () => {
  it("streams its events with sequence numbers, and resumes after N from the event after N; a reader may too", async () => {
    const key = await stack.createKey();
    const res = await stack.call(key.secret, RESPONSES, {
      json: { input: "one two three", background: true, stream: true },
      user: "alice",
    });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toContain("text/event-stream");
    const events = parseEvents(await res.text());
    expect(events.map((e) => e.data.sequence_number)).toEqual(events.map((_, i) => i));
    expect(events.slice(0, 3).map((e) => [e.type, e.data.response.status])).toEqual([
      ["response.created", "queued"],
      ["response.queued", "queued"],
      ["response.in_progress", "in_progress"],
    ]);
    expect(events.at(-1)?.type).toBe("response.completed");
    for (const e of events) expect(openaiSchemaProblems("ResponseStreamEvent", e.data)).toEqual([]);
    const id = events[0]!.data.response.id as string;
    expect(events.at(-1)?.data.response).toMatchObject({ id, status: "completed", background: true });

    const grant = await stack.call(key.secret, "/api/v1/authorization/llm/grant", {
      json: { resourceType: "response", resourceId: id, userId: "carol", role: "reader" },
      user: "alice",
    });
    expect(grant.status).toBe(204);
    const resumed = await stack.call(key.secret, `${RESPONSES}/${id}?stream=true&starting_after=2`, {
      user: "carol",
    });
    expect(resumed.status).toBe(200);
    const rest = parseEvents(await resumed.text());
    expect(rest).toEqual(events.slice(3));
    // Asked from its last event, or from past it, an ended stream ends at once with nothing more.
    for (const after of [events.length - 1, events.length + 1000]) {
      const past = await stack.call(key.secret, `${RESPONSES}/${id}?stream=true&starting_after=${after}`, {
        user: "carol",
      });
      expect(past.status).toBe(200);
      expect(parseEvents(await past.text()), `starting_after=${after}`).toEqual([]);
    }
    // A stranger sees nothing.
    expect((await stack.call(key.secret, `${RESPONSES}/${id}?stream=true`, { user: "bob" })).status).toBe(
      404,
    );
  });

  it("lets a client that went away resume the live stream while it runs", async () => {
    const key = await stack.createKey();
    stack.llm.mode = "hold-midstream";
    const queued = await created(key.secret, { input: "alpha beta gamma" });
    await vi.waitFor(async () => {
      const events = await stack.redis.xrange(`gw:bg:{${queued.id}}:events`, "-", "+");
      expect(events.map(([, f]) => f[1]).join("")).toContain("response.output_text.delta");
    });
    const live = stack.call(key.secret, `${RESPONSES}/${queued.id}?stream=true&starting_after=0`, {
      user: "alice",
    });
    const response = await live;
    stack.llm.release();
    const events = parseEvents(await response.text());
    expect(events[0]?.data.sequence_number).toBe(1);
    expect(events.at(-1)?.type).toBe("response.completed");
    expect(events.map((e) => e.data.sequence_number)).toEqual(events.map((_, i) => i + 1));
  });

  it("refuses to stream a response that did not run in the background", async () => {
    const key = await stack.createKey();
    const plain = await (await stack.call(key.secret, RESPONSES, { json: { input: "x" } })).json();
    const res = await stack.call(key.secret, `${RESPONSES}/${plain.id}?stream=true`);
    expect(res.status).toBe(400);
  });
});
