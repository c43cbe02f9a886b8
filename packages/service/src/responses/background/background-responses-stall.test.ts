import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ManualClock } from "@gw/core/clock";
import { CountingWindows } from "@gw/core/windows";
import { type RunningNodeProcess, spicedbEnv, startNodeProcess } from "@gw/test-kit";
import { Queue } from "bullmq";
import { afterAll, describe, expect, it, vi } from "vitest";
import { parseEvents, useStack } from "../../../test/stack.ts";
import { BACKGROUND_QUEUE, BACKGROUND_QUEUE_PREFIX } from "./index.ts";
import { STOPPED_WORKER } from "./run.ts";

/*
 * A worker killed while a background response runs: the service of the
 * stack runs none itself, a service process of its own (A) takes the
 * response and is killed (SIGKILL) while the provider holds the answer
 * back; an eval worker process (B) then ends the response failed, saying why,
 * within the stall timeout, gives the key's slot back, and the lease A held
 * is settled by the lease sweep.
 */
const stack = useStack({ BACKGROUND_RESPONSE_CONCURRENCY: "0" });
const RESPONSES = "/api/v1/llm/responses";
const LIMITS = { tokens: { minute: 100_000 } };
const workers: RunningNodeProcess[] = [];
let dataDir: string | undefined;

afterAll(async () => {
  stack.llm.release();
  await Promise.all(workers.map((w) => w.stop()));
  if (dataDir) await rm(dataDir, { recursive: true, force: true });
});

/** A process (`entry`) on the stack's stores that runs background responses, their lock lapsing after a second. */
async function backgroundWorker(name: string, entry: string): Promise<RunningNodeProcess> {
  dataDir ??= await mkdtemp(join(tmpdir(), "gw-bg-worker-"));
  const worker = await startNodeProcess({
    name,
    entry,
    port: 0,
    env: {
      PATH: process.env.PATH,
      HOST: "127.0.0.1",
      LOG_LEVEL: "warn",
      DATA_DIR: dataDir,
      REDIS_URL: stack.redisUrl,
      DATABASE_URL: stack.database.url,
      INTERNAL_ASSERTION_SECRET: stack.assertionSecret,
      VAULT_KEYS: stack.vaultKeys,
      ...spicedbEnv(stack.spicedb),
      LLM_BASE_URL: stack.llm.baseUrl,
      LLM_API_KEY: "upstream-secret",
      LLM_DEFAULT_MODEL: "echo-small",
      EVAL_WORKER_CONCURRENCY: "1",
      BACKGROUND_RESPONSE_CONCURRENCY: "1",
      BACKGROUND_RESPONSE_STALL_TIMEOUT: "1s",
    },
  });
  workers.push(worker);
  return worker;
}

const tokensUsed = async (windows: CountingWindows, keyId: string) =>
  (await windows.peek(keyId, undefined, LIMITS)).find((s) => s.unit === "tokens")!.used;

describe("a background response no worker has taken yet", () => {
  it("a queued response cancelled before any worker took it: its job, events and slot are gone, and no worker runs it", async () => {
    const key = await stack.createKey();
    const res = await stack.call(key.secret, RESPONSES, {
      json: { input: "later", background: true },
      user: "alice",
    });
    const { id } = await res.json();
    expect(await stack.redis.zcard(`gw:bg:{${key.id}}:running`)).toBe(1);
    // Another key of the organization, whose end user alice is a writer of it (its owner), cancels it.
    const other = await stack.createKey({ org: key.org });
    const cancel = await stack.call(other.secret, `${RESPONSES}/${id}/cancel`, {
      method: "POST",
      user: "alice",
    });
    expect(cancel.status).toBe(200);
    expect(await cancel.json()).toMatchObject({ id, status: "cancelled" });
    expect(await stack.redis.zcard(`gw:bg:{${key.id}}:running`)).toBe(0);
    const queue = new Queue(BACKGROUND_QUEUE, { connection: stack.redis, prefix: BACKGROUND_QUEUE_PREFIX });
    try {
      expect(await queue.getJob(id)).toBeUndefined();
    } finally {
      await queue.close();
    }
    // Its stream (the queue's two events) ends at once, saying it was cancelled.
    const stream = await stack.call(key.secret, `${RESPONSES}/${id}?stream=true`, { user: "alice" });
    expect(stream.status).toBe(200);
    expect(parseEvents(await stream.text()).map((e) => [e.type, e.data.response.status])).toEqual([
      ["response.created", "queued"],
      ["response.queued", "queued"],
      ["response.cancelled", "cancelled"],
    ]);
    expect(
      (await (await stack.call(key.secret, `${RESPONSES}/${id}`, { user: "alice" })).json()).status,
    ).toBe("cancelled");
  });
});

describe("a background response whose worker is killed mid-call", () => {
  it("ends failed with a stated reason within the stall timeout; its slot is given back and its lease settled", async () => {
    const key = await stack.createKey({ limits: LIMITS });
    const a = await backgroundWorker("background-worker-a", "packages/service/src/main.ts");
    stack.llm.mode = "hold-midstream";
    const before = stack.llm.requests.length;
    const res = await stack.call(key.secret, RESPONSES, {
      json: { input: "one two three", background: true },
      user: "alice",
    });
    expect(res.status).toBe(200);
    const { id } = await res.json();
    // A has the response in progress: the provider sent its first word and holds the rest back.
    await vi.waitFor(() => expect(stack.llm.requests.length).toBe(before + 1), { timeout: 10_000 });
    await vi.waitFor(
      async () => {
        const events = await stack.redis.xrange(`gw:bg:{${id}}:events`, "-", "+");
        expect(events.map(([, f]) => f[1]).join("")).toContain("response.output_text.delta");
      },
      { timeout: 10_000 },
    );
    const windows = new CountingWindows(stack.redis);
    const reserved = await tokensUsed(windows, key.id);
    expect(reserved).toBeGreaterThan(0);

    const exited = new Promise((resolve) => a.process.once("exit", resolve));
    a.process.kill("SIGKILL");
    await exited;
    // Nothing else runs background responses: it stays in progress until another worker is there.
    const stuck = await (await stack.call(key.secret, `${RESPONSES}/${id}`, { user: "alice" })).json();
    expect(stuck.status).toBe("in_progress");

    // B is an eval worker process: those run background responses too.
    await backgroundWorker("background-worker-b", "packages/service/src/eval-worker-main.ts");
    await vi.waitFor(
      async () => {
        const r = await (await stack.call(key.secret, `${RESPONSES}/${id}`, { user: "alice" })).json();
        expect(r).toMatchObject({
          status: "failed",
          error: { code: "server_error", message: STOPPED_WORKER },
        });
      },
      { timeout: 30_000, interval: 100 },
    );
    // Its stream ends with response.failed, after what A sent.
    const events = parseEvents(
      await (await stack.call(key.secret, `${RESPONSES}/${id}?stream=true`, { user: "alice" })).text(),
    );
    expect(events[0]?.type).toBe("response.created");
    expect(events.at(-1)).toMatchObject({
      type: "response.failed",
      data: { response: { status: "failed" } },
    });
    expect(events.map((e) => e.data.sequence_number)).toEqual(events.map((_, i) => i));
    // The key's slot is free again.
    expect(await stack.redis.zcard(`gw:bg:{${key.id}}:running`)).toBe(0);
    // A's lease is settled by the sweep once its time passed unrenewed (a clock a lease's time ahead):
    // the prompt stays charged (the provider had it), the reserved output goes back.
    const later = new CountingWindows(stack.redis, { clock: new ManualClock(0, Date.now() + 61_000) });
    const holders = await later.sweep();
    expect(holders).toEqual([expect.stringContaining(`:${a.process.pid}:`)]);
    const charged = await tokensUsed(windows, key.id);
    expect(charged).toBeGreaterThan(0);
    expect(charged).toBeLessThan(reserved);
  }, 90_000);
});
