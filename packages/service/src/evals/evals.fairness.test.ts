import { systemClock } from "@gw/core/clock";
import { createLogger } from "@gw/core/logger";
import { createMetrics } from "@gw/core/metrics";
import { createPostgres } from "@gw/core/postgres";
import { Queue } from "bullmq";
import { afterAll, describe, expect, it, vi } from "vitest";
import { testBudgetDeps } from "../../test/budget-deps.ts";
import { evalClient, finished } from "../../test/evals-client.ts";
import { testProvider } from "../../test/providers.ts";
import { useStack } from "../../test/stack.ts";
import { ids } from "../ids.ts";
import { UsageStore } from "../usage/store.ts";
import { type Evals, startEvals } from "./index.ts";
import { EVAL_QUEUE, EVAL_QUEUE_PREFIX } from "./queue.ts";

// The service runs no workers: the test starts them once every firing is waiting in the queue.
const stack = useStack({ EVAL_WORKER_CONCURRENCY: "0" });
const WORKERS = 2;
let workers: Evals | undefined;
let db: ReturnType<typeof createPostgres> | undefined;
let stopFollowing: (() => Promise<void>) | undefined;
afterAll(async () => {
  await stopFollowing?.().catch(() => undefined);
  await workers?.close();
  await db?.close();
});

/** A queue event: what happened to which job. */
interface QueueEvent {
  event: string;
  jobId: string;
}

/**
 * Follows the queue's event stream (BullMQ's own, written inside its scripts, so in the order things
 * happened) from its start, keeping every entry: BullMQ trims the stream to its last 10,000 events, which
 * A's hundred schedules pass in under a minute, so reading it once at the end would miss B's first runs.
 */
function followQueueEvents(): { events: QueueEvent[]; stop(): Promise<void> } {
  const key = `${EVAL_QUEUE_PREFIX}:${EVAL_QUEUE}:events`;
  const events: QueueEvent[] = [];
  let last = "0";
  let stopped = false;
  const read = async () => {
    const answer = await stack.redis.xread("COUNT", 5_000, "STREAMS", key, last);
    for (const [, entries] of answer ?? []) {
      for (const [id, fields] of entries) {
        const map = new Map<string, string>();
        for (let i = 0; i < fields.length; i += 2) map.set(fields[i]!, fields[i + 1]!);
        events.push({ event: map.get("event")!, jobId: map.get("jobId") ?? "" });
        last = id;
      }
    }
  };
  let failed: unknown;
  const loop = (async () => {
    while (!stopped) {
      await read();
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    await read();
  })().catch((err: unknown) => {
    failed = err;
  });
  const stop = async () => {
    stopped = true;
    await loop;
    if (failed) throw failed;
  };
  stopFollowing = stop;
  return { events, stop };
}

describe("fairness between organizations on the shared eval queue", () => {
  it("with A's 100 one-second schedules ahead of it, each run of B's one starts behind at most one run of A's", async () => {
    const [a, b] = [await stack.createKey(), await stack.createKey()];
    const [evalsA, evalsB] = [evalClient(stack, a.secret), evalClient(stack, b.secret)];
    const queue = new Queue(EVAL_QUEUE, { connection: stack.redis, prefix: EVAL_QUEUE_PREFIX });
    const waiting = async () => (await queue.getJobCounts("wait")).wait;
    let scheduleB: { id: string };
    try {
      for (let batch = 0; batch < 10; batch++) {
        await Promise.all(
          Array.from({ length: 10 }, (_, i) =>
            evalsA.created({ name: `a${batch * 10 + i}`, inputs: ["from A"], every_seconds: 1 }),
          ),
        );
      }
      // Every first firing of A's is queued before B's schedule exists.
      await vi.waitFor(async () => expect(await waiting()).toBe(100), { timeout: 10_000 });
      scheduleB = await evalsB.created({ name: "b", inputs: ["from B"], every_seconds: 1 });
      await vi.waitFor(async () => expect(await waiting()).toBe(101), { timeout: 10_000 });
    } finally {
      await queue.close();
    }

    const followed = followQueueEvents();
    db = createPostgres(stack.database.url, { connectionName: "fairness-workers" });
    workers = startEvals(
      {
        shutdownGraceMs: 10_000,
        redisUrl: stack.redisUrl,
        redis: stack.redis,
        db,
        retention: { runRetentionMs: 86_400_000, runsPerSchedule: 1_000 },
        provider: testProvider({
          baseUrl: stack.llm.baseUrl,
          apiKey: undefined,
          defaultModel: "echo-small",
          timeoutMs: 10_000,
          ids: ids(systemClock),
        }),
        usage: new UsageStore(stack.redis),
        budgets: testBudgetDeps(stack.redis),
        logger: createLogger("fairness-test", "silent"),
        clock: systemClock,
        metrics: createMetrics("fairness"),
      },
      WORKERS,
      { maxSchedulesPerOrg: 100, minIntervalSeconds: 1 },
    );
    // 100 schedules of A's a second ahead of it: on a loaded machine B's third run may take a while.
    const bRuns = await evalsB.untilRuns(
      scheduleB.id,
      (r) => expect(finished(r).length).toBeGreaterThanOrEqual(3),
      // Loaded runs (the suite beside pnpm start) took longer than 40 s for three runs: the order checked
      // below is what the test is about, not how soon the runs come.
      150_000,
    );
    await workers.close();
    workers = undefined;

    await followed.stop();
    const { events } = followed;
    const bIds = new Set(bRuns.map((r) => r.id));
    const isRun = (jobId: string) => jobId.startsWith("eval_run_");
    const checked = finished(bRuns)
      .reverse() // oldest first
      .map((run) => {
        const added = events.findIndex((e) => e.event === "added" && e.jobId === run.id);
        const active = events.findIndex((e) => e.event === "active" && e.jobId === run.id);
        expect(added, `B's run ${run.id} is in the event stream`).toBeGreaterThanOrEqual(0);
        expect(active).toBeGreaterThan(added);
        const before = events.slice(0, added);
        const started = new Set(before.filter((e) => e.event === "active").map((e) => e.jobId));
        return {
          // A's runs waiting to start when B's was queued: what B's run could have queued behind.
          aWaiting: before.filter(
            (e) => e.event === "added" && isRun(e.jobId) && !bIds.has(e.jobId) && !started.has(e.jobId),
          ).length,
          // Runs started while B's waited.
          startedAhead: events.slice(added, active).filter((e) => e.event === "active" && isRun(e.jobId))
            .length,
        };
      });
    expect(checked.length).toBeGreaterThanOrEqual(3);
    expect(checked[0]!.aWaiting).toBeGreaterThanOrEqual(100 - WORKERS);
    for (const c of checked) expect(c.startedAhead).toBeLessThanOrEqual(1);
    for (const id of (await (await evalsA.list("?limit=100")).json()).data.map((s: { id: string }) => s.id))
      expect((await evalsA.delete(id)).status).toBe(200);
  }, 240_000);
});
