import { createLogger, createMetrics, createRedis, type RedisClient, RedisUnavailable } from "@gw/core";
import { REDIS_TOPOLOGIES, startTestRedisOf, type TestRedisStore } from "@gw/devstack/testing";
import { type FakeLLM, startFakeLLM } from "@gw/e2e/llm-upstream";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { createEvalMetrics } from "../src/evals/metrics.ts";
import { bullConnection, EvalQueue } from "../src/evals/queue.ts";
import { type EvalSchedule, newEvalId, RUN_PREFIX, SCHEDULE_PREFIX } from "../src/evals/records.ts";
import { EvalStore } from "../src/evals/store.ts";
import { startEvalWorker } from "../src/evals/worker.ts";
import { ChatProvider } from "../src/llm/provider.ts";
import { UsageStore } from "../src/usage/store.ts";

let orgs = 0;
describe.each(REDIS_TOPOLOGIES)("eval store on %s Redis", (topology) => {
  let server: TestRedisStore;
  let redis: RedisClient;
  let store: EvalStore;
  let llm: FakeLLM;

  beforeAll(async () => {
    [server, llm] = await Promise.all([startTestRedisOf(topology), startFakeLLM()]);
    redis = createRedis(server.url, { connectionName: "eval-store-test" });
    redis.on("error", () => undefined); // the outage test below stops the server on purpose
    store = new EvalStore(redis);
  });

  afterAll(async () => {
    redis?.disconnect();
    await Promise.all([server?.stop(), llm?.close()]);
  });

  async function scheduleIn(): Promise<{ org: string; schedule: EvalSchedule }> {
    const org = `org${++orgs}`;
    const schedule: EvalSchedule = {
      id: newEvalId(SCHEDULE_PREFIX),
      name: "s",
      model: "auto",
      inputs: ["x"],
      cadence: { every_seconds: 60 },
      created_at: 1,
      metadata: {},
      creator: { user: "alice", keyId: "key_1" },
      deleted_at: null,
    };
    expect(await store.createWithinCap(org, schedule, 100)).toBe(true);
    return { org, schedule };
  }

  /**
   * Runs `calls` (each on its own connection) while Redis holds writes back,
   * releasing them once both are waiting at Redis: a check made apart from
   * its write would pass for both here.
   */
  async function heldTogether<T>(calls: ((store: EvalStore) => Promise<T>)[]): Promise<T[]> {
    // One control connection per server: on a cluster, the calls land on whichever node holds the slot.
    const controls = server.nodes.map((node) => createRedis(node.url, { connectionName: "race-control" }));
    const clients = calls.map((_, i) => createRedis(server.url, { connectionName: `race-${i}` }));
    const everyNode = (...args: (string | number)[]) =>
      Promise.all(controls.map((c) => c.call("CLIENT", ...args)));
    try {
      await everyNode("PAUSE", 20_000, "WRITE");
      const pending = calls.map((call, i) => call(new EvalStore(clients[i]!)));
      await vi.waitFor(
        async () => {
          const waiting = (await everyNode("LIST"))
            .flatMap((list) => String(list).split("\n"))
            .filter((line) => / name=race-\d+ .* flags=b .* cmd=eval /.test(line));
          expect(waiting).toHaveLength(calls.length);
        },
        { timeout: 10_000, interval: 20 },
      );
      await everyNode("UNPAUSE");
      return await Promise.all(pending);
    } finally {
      await everyNode("UNPAUSE");
      for (const c of [...controls, ...clients]) c.disconnect();
    }
  }

  it("soft-deletes in one atomic step: of two deletes held at Redis together, exactly one succeeds", async () => {
    const { org, schedule } = await scheduleIn();
    const del = (s: EvalStore) => s.softDelete(org, schedule.id, 5);
    expect((await heldTogether([del, del])).sort()).toEqual([false, true]);
    expect((await store.get(org, schedule.id))?.deleted_at).toBe(5);
    expect(await store.softDelete(org, schedule.id, 6)).toBe(false);
    expect(await store.softDelete("other-org", schedule.id, 6)).toBe(false);
  });

  it("queues at most one run per schedule, and starts a run only while its schedule exists", async () => {
    const { org, schedule } = await scheduleIn();
    const [r1, r2, r3] = [1, 2, 3].map(() => newEvalId(RUN_PREFIX)) as [string, string, string];
    expect(await store.enqueue(org, schedule.id, r1, 10)).toEqual({ outcome: "queued", backlog: 1 });
    expect(await store.enqueue(org, schedule.id, r2, 11)).toEqual({ outcome: "busy" });
    expect(await store.start(org, schedule.id, r1, 12)).toMatchObject({ outcome: "started", schedule });
    expect(await store.enqueue(org, schedule.id, r2, 13)).toEqual({ outcome: "queued", backlog: 1 });
    // Delivered again while marked running: its worker died; the run ends failed rather than running forever.
    expect(await store.start(org, schedule.id, r1, 14)).toEqual({ outcome: "interrupted" });
    expect(await store.getRun(org, r1)).toMatchObject({ status: "failed", completed_at: 14 });
    expect(await store.start(org, schedule.id, r1, 15)).toEqual({ outcome: "gone" });

    expect(await store.softDelete(org, schedule.id, 16)).toBe(true);
    expect(await store.start(org, schedule.id, r2, 17)).toEqual({ outcome: "deleted" });
    expect(await store.getRun(org, r2)).toMatchObject({
      status: "failed",
      started_at: null,
      completed_at: 17,
      error: "The schedule was deleted before this run started",
    });
    expect(await store.enqueue(org, schedule.id, r3, 18)).toEqual({ outcome: "deleted" });
    expect(await store.getRun(org, r3)).toBeUndefined();
    expect(await store.enqueue("other-org", schedule.id, r3, 18)).toEqual({ outcome: "missing" });
  });

  it("counts an organization's live schedules and adds one in one step: of two creates held at Redis together at the cap's last place, exactly one succeeds", async () => {
    const { org, schedule } = await scheduleIn();
    const another = () => ({ ...schedule, id: newEvalId(SCHEDULE_PREFIX) });
    const [a, b] = [another(), another()];
    const results = await heldTogether([
      (s) => s.createWithinCap(org, a, 2),
      (s) => s.createWithinCap(org, b, 2),
    ]);
    expect(results.sort()).toEqual([false, true]);
    const listed = await store.list(org, 10);
    expect(listed?.data).toHaveLength(2);
    // A deleted schedule frees its place; another organization's count is its own.
    expect(await store.createWithinCap(org, another(), 2)).toBe(false);
    expect(await store.softDelete(org, schedule.id, 3)).toBe(true);
    expect(await store.createWithinCap(org, another(), 2)).toBe(true);
    expect(await store.createWithinCap(`${org}-other`, another(), 1)).toBe(true);
  });

  it("numbers each run by its organization's backlog: runs waiting to start, across its schedules", async () => {
    const { org, schedule } = await scheduleIn();
    const second = { ...schedule, id: newEvalId(SCHEDULE_PREFIX) };
    const third = { ...schedule, id: newEvalId(SCHEDULE_PREFIX) };
    for (const s of [second, third]) expect(await store.createWithinCap(org, s, 100)).toBe(true);
    const other = await scheduleIn();
    const [r1, r2, r3, r4, r5] = [1, 2, 3, 4, 5].map(() => newEvalId(RUN_PREFIX)) as string[];
    expect(await store.enqueue(org, schedule.id, r1!, 1)).toEqual({ outcome: "queued", backlog: 1 });
    expect(await store.enqueue(org, second.id, r2!, 1)).toEqual({ outcome: "queued", backlog: 2 });
    expect(await store.enqueue(other.org, other.schedule.id, r3!, 1)).toEqual({
      outcome: "queued",
      backlog: 1,
    });
    // A run that starts, or is abandoned, leaves the backlog.
    await store.start(org, schedule.id, r1!, 2);
    expect(await store.enqueue(org, third.id, r4!, 2)).toEqual({ outcome: "queued", backlog: 2 });
    await store.abandon(org, second.id, r2!, 3, "could not be queued");
    expect(await store.enqueue(org, schedule.id, r5!, 3)).toEqual({ outcome: "queued", backlog: 2 });
  });

  it("a worker that picks up the queued run of a schedule deleted meanwhile drops it without calling the model", async () => {
    const { org, schedule } = await scheduleIn();
    const producer = bullConnection(server.url, "producer");
    const queue = new EvalQueue(producer, () => undefined);
    const runId = newEvalId(RUN_PREFIX);
    expect(await store.enqueue(org, schedule.id, runId, 20)).toMatchObject({ outcome: "queued" });
    await queue.addRun({ org, scheduleId: schedule.id, runId }, 1);
    expect(await store.softDelete(org, schedule.id, 21)).toBe(true);

    const metrics = createEvalMetrics(createMetrics("test"));
    const connection = bullConnection(server.url, "worker");
    const before = llm.requests.length;
    const worker = startEvalWorker(
      connection,
      {
        store,
        queue,
        metrics,
        usage: new UsageStore(redis),
        logger: createLogger("eval-store-test", "silent"),
        provider: new ChatProvider({
          baseUrl: llm.baseUrl,
          apiKey: undefined,
          defaultModel: "echo",
          allowedModels: undefined,
          timeoutMs: 5_000,
          maxResponseBytes: 1_000_000,
          maxEventChars: 100_000,
        }),
      },
      1,
    );
    try {
      await vi.waitFor(async () => expect((await store.getRun(org, runId))?.status).toBe("failed"), {
        timeout: 10_000,
      });
      expect(await store.getRun(org, runId)).toMatchObject({ started_at: null });
      await vi.waitFor(
        async () =>
          expect((await metrics.runs.get()).values).toContainEqual(
            expect.objectContaining({ labels: { outcome: "dropped" }, value: 1 }),
          ),
        { timeout: 10_000 },
      );
      expect(llm.requests.length).toBe(before);
    } finally {
      await worker.close();
      await queue.close();
      connection.disconnect();
      producer.disconnect();
    }
  });

  it("pages newest first from a cursor, and refuses a cursor from elsewhere", async () => {
    const { org, schedule } = await scheduleIn();
    const runs: string[] = [];
    for (let i = 0; i < 5; i++) {
      const id = newEvalId(RUN_PREFIX);
      expect(await store.enqueue(org, schedule.id, id, 30 + i)).toMatchObject({ outcome: "queued" });
      await store.start(org, schedule.id, id, 30 + i);
      runs.unshift(id);
    }
    const first = await store.runs(org, schedule.id, 2);
    expect(first?.data.map((r) => r.id)).toEqual(runs.slice(0, 2));
    expect(first?.has_more).toBe(true);
    const rest = await store.runs(org, schedule.id, 3, runs[1]);
    expect(rest?.data.map((r) => r.id)).toEqual(runs.slice(2));
    expect(rest?.has_more).toBe(false);
    expect(await store.runs(org, schedule.id, 3, "eval_run_unknown")).toBeNull();
    const other = await scheduleIn();
    expect(await store.runs(other.org, other.schedule.id, 3, runs[0])).toBeNull();
    expect(await store.runs("nobody", schedule.id, 3)).toEqual({ data: [], has_more: false });
  });

  it("reports a Redis outage during a queue call as RedisUnavailable (a 503), and works again after", async () => {
    const producer = bullConnection(server.url, "producer");
    const queue = new EvalQueue(producer, () => undefined);
    const id = newEvalId(SCHEDULE_PREFIX);
    try {
      expect(await queue.schedule("org", id, { cron: "0 0 1 1 *", timezone: "UTC" })).toEqual(
        expect.any(Number),
      );
      await server.halt();
      try {
        await expect(queue.unschedule(id)).rejects.toBeInstanceOf(RedisUnavailable);
        await expect(queue.nextRuns([id])).rejects.toBeInstanceOf(RedisUnavailable);
      } finally {
        await server.restart();
      }
      await vi.waitFor(() => expect(producer.status).toBe("ready"), { timeout: 10_000 });
      await queue.unschedule(id);
      expect((await queue.nextRuns([id])).size).toBe(0);
    } finally {
      await queue.close();
      producer.disconnect();
    }
  });
});
