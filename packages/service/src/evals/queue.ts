import { createRedis, type RedisClient, RedisUnavailable } from "@gw/core/redis";
import { Queue } from "bullmq";
import { ReplyError } from "ioredis";
import type { Cadence } from "./records.ts";

export const EVAL_QUEUE = "eval-runs";
/** The hash tag puts every key of the queue in one Redis Cluster slot, as BullMQ's scripts need. */
export const EVAL_QUEUE_PREFIX = "gw:{evals}";

/** A schedule firing, made by the schedule's job scheduler. */
export interface TickJob {
  org: string;
  scheduleId: string;
}

/** One queued run. Its job id is the run id, so a run is never queued twice. */
export interface RunJob extends TickJob {
  runId: string;
}

export type EvalJobName = "tick" | "run";

/** BullMQ's lowest priority (the largest number). */
const MAX_PRIORITY = 2_097_151;

// Jobs are transient: what a run did lives in the eval store. Failed jobs stay a day for inspection.
const JOB_RETENTION = { removeOnComplete: true, removeOnFail: { age: 86_400 } } as const;

/**
 * BullMQ's Redis connections (one server or a cluster, as `REDIS_URL` says),
 * with ioredis's own errors, as BullMQ reads them (a closed connection) to
 * recover. Workers block on Redis and must retry forever
 * (`maxRetriesPerRequest: null`, no command timeout); the producer fails
 * fast, as an HTTP request cannot wait for Redis to come back.
 */
export function bullConnection(url: string, role: "producer" | "worker"): RedisClient {
  return createRedis(url, {
    connectionName: `service-evals-${role}`,
    rawErrors: true,
    ...(role === "worker"
      ? { extra: { maxRetriesPerRequest: null, commandTimeout: undefined } }
      : { commandTimeoutMs: 2_000 }),
  });
}

/** The eval queue: one BullMQ job scheduler per eval schedule, and the runs it queues. */
export class EvalQueue {
  private readonly queue: Queue<TickJob | RunJob, void, string>;
  private readonly connection: RedisClient;

  constructor(connection: RedisClient, onError: (err: Error) => void) {
    this.connection = connection;
    this.queue = new Queue(EVAL_QUEUE, { connection, prefix: EVAL_QUEUE_PREFIX });
    this.queue.on("error", onError);
  }

  /** Creates the schedule's job scheduler; resolves with when it fires next (epoch ms). */
  async schedule(org: string, scheduleId: string, cadence: Cadence): Promise<number | undefined> {
    const repeat =
      "every_seconds" in cadence
        ? { every: cadence.every_seconds * 1000 }
        : { pattern: cadence.cron, tz: cadence.timezone };
    await this.available(() =>
      this.queue.upsertJobScheduler(scheduleId, repeat, {
        name: "tick",
        data: { org, scheduleId } satisfies TickJob,
        opts: JOB_RETENTION,
      }),
    );
    // The scheduler's own figure: the first job's timestamp plus delay may be off by the milliseconds between them.
    return (await this.nextRuns([scheduleId])).get(scheduleId);
  }

  /**
   * Removes the job scheduler and its next delayed firing. A firing already
   * waiting or active is not removed: the worker drops it (see the eval store's start).
   */
  async unschedule(scheduleId: string): Promise<void> {
    await this.available(() => this.queue.removeJobScheduler(scheduleId));
  }

  /** When each schedule fires next (epoch ms); absent if it has no job scheduler. */
  async nextRuns(scheduleIds: string[]): Promise<Map<string, number>> {
    const schedulers = await this.available(() =>
      Promise.all(scheduleIds.map((id) => this.queue.getJobScheduler(id))),
    );
    const next = new Map<string, number>();
    scheduleIds.forEach((id, i) => {
      const at = schedulers[i]?.next;
      if (at !== undefined) next.set(id, Number(at));
    });
    return next;
  }

  /**
   * Queues a run behind the runs of every organization with a shorter
   * backlog: its priority is its place in its organization's backlog, so
   * workers take each organization's first waiting run, then each one's
   * second, and so on (round-robin by organization), whatever the number of
   * schedules behind any one of them. Firings (no priority) go before any run.
   */
  async addRun(job: RunJob, backlog: number): Promise<void> {
    const priority = Math.min(Math.max(backlog, 1), MAX_PRIORITY);
    await this.queue.add("run", job, { jobId: job.runId, priority, ...JOB_RETENTION });
  }

  async depth(): Promise<{ waiting: number; active: number; delayed: number }> {
    const counts = await this.queue.getJobCounts("waiting", "active", "delayed");
    return { waiting: counts.waiting ?? 0, active: counts.active ?? 0, delayed: counts.delayed ?? 0 };
  }

  async close(): Promise<void> {
    await this.queue.close();
  }

  /** An outage (connection down, command timed out) is the 503 it is for every other Redis call of the service. */
  private async available<T>(call: () => Promise<T>): Promise<T> {
    try {
      return await call();
    } catch (err) {
      const outage =
        !(err instanceof ReplyError) &&
        (this.connection.status !== "ready" || /timed out/i.test((err as Error).message));
      throw outage ? new RedisUnavailable(err) : err;
    }
  }
}
