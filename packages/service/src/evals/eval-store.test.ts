import { ManualClock, systemClock } from "@gw/core/clock";
import { parseDuration } from "@gw/core/duration";
import { createLogger } from "@gw/core/logger";
import { createMetrics } from "@gw/core/metrics";
import { createPostgres, type Postgres } from "@gw/core/postgres";
import { createRedis, type RedisClient, RedisUnavailable } from "@gw/core/redis";
import { describeEachTopology, redisStartedEarly, type TestRedisStore, useTestDatabase } from "@gw/test-kit";
import { type FakeLLM, startFakeLLM } from "@gw/test-kit/llm-upstream";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { testBudgetDeps } from "../../test/budget-deps.ts";
import { testProvider } from "../../test/providers.ts";
import { ids } from "../ids.ts";
import { UsageStore } from "../usage/store.ts";
import { RedisCreatorKeys } from "./creator.ts";
import { createEvalMetrics } from "./metrics.ts";
import { bullConnection, EvalQueue } from "./queue.ts";
import { type EvalSchedule, newEvalId, RUN_PREFIX, SCHEDULE_PREFIX, unixSeconds } from "./records.ts";
import { EvalStore, type EvalStoreOptions } from "./store.ts";
import { startEvalWorker } from "./worker.ts";

const RETENTION: EvalStoreOptions = {
  runRetentionMs: parseDuration("90d")!,
  runsPerSchedule: 1_000,
  clock: systemClock,
};
const database = useTestDatabase();
let db: Postgres;
let store: EvalStore;
beforeAll(() => {
  db = createPostgres(database.url, { connectionName: "eval-store-test" });
  // Its clock stands at the epoch, so the small times the tests below write (unix seconds 1, 10, 30...)
  // are within the retention; the retention tests run clocks of their own.
  store = new EvalStore(db, { ...RETENTION, clock: new ManualClock(0, 0) });
});
afterAll(() => db?.close());

let orgs = 0;
async function scheduleIn(into: EvalStore = store): Promise<{ org: string; schedule: EvalSchedule }> {
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
  expect(await into.createWithinCap(org, schedule, 100)).toBe(true);
  return { org, schedule };
}

/** Backends of this test's database waiting on a lock, by the connection names they start with. */
async function waitingOnLocks(prefix: string, event?: string): Promise<number> {
  const { rows } = await db.query<{ n: string }>(
    `SELECT count(*) AS n FROM pg_stat_activity
     WHERE datname = current_database() AND application_name LIKE $1 || '%'
       AND wait_event_type = 'Lock' AND ($2::text IS NULL OR wait_event = $2)`,
    [prefix, event ?? null],
  );
  return Number(rows[0]!.n);
}

/**
 * Runs `calls` (each on its own connection) while writes to the eval tables
 * are held back (a transaction of the test holds them locked EXCLUSIVE,
 * which lets plain reads through), releasing them once every call waits on
 * a lock: a check made apart from its write would pass for all of them here.
 */
async function heldTogether<T>(calls: ((store: EvalStore) => Promise<T>)[]): Promise<T[]> {
  const control = createPostgres(database.url, { connectionName: "race-control" });
  const pools = calls.map((_, i) => createPostgres(database.url, { connectionName: `race-${i}` }));
  let release!: () => void;
  const released = new Promise<void>((resolve) => (release = resolve));
  let locked!: () => void;
  const isLocked = new Promise<void>((resolve) => (locked = resolve));
  const holding = control.transaction(async (tx) => {
    await tx.query("LOCK TABLE eval_schedules, eval_runs IN EXCLUSIVE MODE");
    locked();
    await released;
  });
  try {
    await isLocked;
    const pending = calls.map((call, i) => call(new EvalStore(pools[i]!, RETENTION)));
    await vi.waitFor(async () => expect(await waitingOnLocks("race-")).toBe(calls.length), {
      timeout: 10_000,
      interval: 20,
    });
    release();
    await holding;
    return await Promise.all(pending);
  } finally {
    release();
    await holding.catch(() => undefined);
    await Promise.all([control, ...pools].map((p) => p.close()));
  }
}

describe("eval store on PostgreSQL", () => {
  it("soft-deletes in one atomic step: of two deletes held at PostgreSQL together, exactly one succeeds", async () => {
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

  it("counts an organization's live schedules and adds one in one step: of two creates held at PostgreSQL together at the cap's last place, exactly one succeeds", async () => {
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

  it("a create that has counted holds off another of its organization until it has added (forced interleaving at the cap)", async () => {
    const { org, schedule } = await scheduleIn();
    const another = () => ({ ...schedule, id: newEvalId(SCHEDULE_PREFIX) });
    let counted!: () => void;
    const firstCounted = new Promise<void>((resolve) => (counted = resolve));
    let proceed!: () => void;
    const mayProceed = new Promise<void>((resolve) => (proceed = resolve));
    let counts = 0;
    const hooked = createPostgres(database.url, { connectionName: "cap-hooked" });
    const seam = new EvalStore(hooked, {
      ...RETENTION,
      afterCount: async () => {
        if (++counts > 1) return;
        counted();
        await mayProceed;
      },
    });
    try {
      const first = seam.createWithinCap(org, another(), 2);
      await firstCounted;
      let secondSettled = false;
      const second = seam.createWithinCap(org, another(), 2).finally(() => {
        secondSettled = true;
      });
      // The second either waits on the organization's lock, or (were counting apart from adding) it
      // counts one live schedule now and adds its own before the first has.
      await vi.waitFor(
        async () =>
          expect(secondSettled || (await waitingOnLocks("cap-hooked", "advisory")) === 1).toBe(true),
        { timeout: 10_000, interval: 20 },
      );
      proceed();
      expect([await first, await second]).toEqual([true, false]);
      expect((await store.list(org, 10))?.data).toHaveLength(2);
    } finally {
      proceed();
      await hooked.close();
    }
  });

  describe("retention (a database of its own: the sweep deletes across organizations)", () => {
    const ownDatabase = useTestDatabase();
    let own: Postgres;
    beforeAll(() => {
      own = createPostgres(ownDatabase.url, { connectionName: "eval-retention-test" });
    });
    afterAll(() => own?.close());

    it("runs past EVAL_RUN_RETENTION vanish from every read at once; the sweep deletes them in batches, then deleted schedules with no run left", async () => {
      const start = Date.parse("2026-01-01T00:00:00Z");
      const clock = new ManualClock(0, start);
      const clocked = new EvalStore(own, { ...RETENTION, clock });
      const { org, schedule } = await scheduleIn(clocked);
      const runOnce = async () => {
        const id = newEvalId(RUN_PREFIX);
        expect(await clocked.enqueue(org, schedule.id, id, unixSeconds(clock.wall()))).toMatchObject({
          outcome: "queued",
        });
        expect(await clocked.start(org, schedule.id, id, unixSeconds(clock.wall()))).toMatchObject({
          outcome: "started",
        });
        await clocked.update(org, id, {
          results: [],
          end: { status: "completed", at: unixSeconds(clock.wall()), error: null },
        });
        return id;
      };
      const [old1, old2] = [await runOnce(), await runOnce()];
      clock.advance(10 * 86_400_000);
      const recent = await runOnce();
      const listed = async () => (await clocked.runs(org, schedule.id, 10))?.data.map((r) => r.id);
      expect(await listed()).toEqual([recent, old2, old1]);

      clock.advance(start + parseDuration("90d")! + 1_000 - clock.wall());
      expect(await listed()).toEqual([recent]);
      expect(await clocked.getRun(org, old1)).toBeUndefined();
      expect(await clocked.getRun(org, recent)).toMatchObject({ status: "completed" });
      const rows = async () =>
        Number(
          (await own.query<{ n: string }>("SELECT count(*) AS n FROM eval_runs WHERE org = $1", [org]))
            .rows[0]!.n,
        );
      expect(await rows()).toBe(3);
      expect(await clocked.sweep(1)).toEqual({ runs: 2, schedules: 0 });
      expect(await rows()).toBe(1);

      // Deleted, the schedule stays while a run of it is kept, and goes with its last one.
      expect(await clocked.softDelete(org, schedule.id, unixSeconds(clock.wall()))).toBe(true);
      expect(await clocked.sweep()).toEqual({ runs: 0, schedules: 0 });
      clock.advance(parseDuration("90d")!);
      expect(await clocked.sweep()).toEqual({ runs: 1, schedules: 1 });
      expect(await clocked.get(org, schedule.id)).toBeUndefined();
    });
  });

  it("keeps the newest EVAL_RUNS_PER_SCHEDULE runs: a lower cap shows at once in reads, and the next firing deletes the rest", async () => {
    const { org, schedule } = await scheduleIn();
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) {
      const id = newEvalId(RUN_PREFIX);
      expect(await store.enqueue(org, schedule.id, id, unixSeconds(Date.now()))).toMatchObject({
        outcome: "queued",
      });
      await store.start(org, schedule.id, id, unixSeconds(Date.now()));
      await store.update(org, id, { end: { status: "completed", at: unixSeconds(Date.now()), error: null } });
      ids.unshift(id);
    }
    const capped = new EvalStore(db, { ...RETENTION, runsPerSchedule: 3 });
    expect((await capped.runs(org, schedule.id, 10))?.data.map((r) => r.id)).toEqual(ids.slice(0, 3));
    expect(await capped.getRun(org, ids[3]!)).toBeUndefined();
    expect(await store.getRun(org, ids[3]!)).toBeDefined();
    const rows = async () =>
      (
        await db.query<{ id: string }>("SELECT id FROM eval_runs WHERE org = $1 ORDER BY seq DESC", [org])
      ).rows.map((r) => r.id);
    expect(await rows()).toHaveLength(5);
    const next = newEvalId(RUN_PREFIX);
    expect(await capped.enqueue(org, schedule.id, next, unixSeconds(Date.now()))).toMatchObject({
      outcome: "queued",
    });
    expect(await rows()).toEqual([next, ...ids.slice(0, 2)]);
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
});

describeEachTopology("eval runs through the queue on %s Redis", (topology) => {
  let server: TestRedisStore;
  let redis: RedisClient;
  let llm: FakeLLM;

  const serverStarted = redisStartedEarly(topology);
  beforeAll(async () => {
    [server, llm] = await Promise.all([serverStarted(), startFakeLLM()]);
    redis = createRedis(server.url, { connectionName: "eval-store-test" });
    redis.on("error", () => undefined); // the outage test below stops the server on purpose
  });

  afterAll(async () => {
    redis?.disconnect();
    await Promise.all([server?.stop(), llm?.close()]);
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
        budgets: testBudgetDeps(redis),
        creators: new RedisCreatorKeys(redis, systemClock),
        logger: createLogger("eval-store-test", "silent"),
        clock: systemClock,
        provider: testProvider({
          baseUrl: llm.baseUrl,
          apiKey: undefined,
          defaultModel: "echo",
          timeoutMs: 5_000,
          ids: ids(systemClock),
        }),
      },
      1,
      10_000,
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
