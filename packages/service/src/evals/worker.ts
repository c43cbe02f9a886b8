import type { Logger } from "@gw/core/logger";
import type { RedisClient } from "@gw/core/redis";
import { type Job, Worker } from "bullmq";
import { type ExecuteRunDeps, executeRun } from "./execute-run.ts";
import type { EvalMetrics } from "./metrics.ts";
import { EVAL_QUEUE, EVAL_QUEUE_PREFIX, type EvalQueue, type RunJob, type TickJob } from "./queue.ts";
import { newEvalId, RUN_PREFIX, unixSeconds } from "./records.ts";

/** How long a stopping worker lets its jobs finish before it cuts them short (they end `failed`). */

export interface EvalWorkerDeps extends ExecuteRunDeps {
  queue: EvalQueue;
  metrics: EvalMetrics;
}

export interface EvalWorker {
  /** Stops taking jobs and waits for the runs in progress (cut short after a grace period). */
  close(): Promise<void>;
}

/**
 * Processes the eval queue with `concurrency` jobs at a time. A `tick` (a
 * schedule firing) becomes a queued run and its `run` job; a `run` job
 * starts the run unless its schedule was deleted meanwhile, then executes it.
 * Any number of these workers, in the service or in their own processes, may
 * share one Redis.
 */
export function startEvalWorker(
  connection: RedisClient,
  deps: EvalWorkerDeps,
  concurrency: number,
  graceMs: number,
): EvalWorker {
  return startQueueWorker<TickJob | RunJob>(
    EVAL_QUEUE,
    connection,
    (job, signal) => (job.name === "tick" ? tick(deps, job.data) : run(deps, job as Job<RunJob>, signal)),
    { concurrency, logger: deps.logger, what: "eval", graceMs },
  );
}

/**
 * A BullMQ worker on `queue` (under the evals' prefix unless told another,
 * on `connection`, one of `bullConnection`'s) processing `concurrency` jobs at a time, whose
 * `close` lets the jobs in progress finish (their signal aborted after a
 * grace period). The eval runs and background responses (responses/background)
 * share it. `lockMs`: how long a job stays taken without its worker
 * renewing it; past it, a worker's stall check hands it out again.
 */
export function startQueueWorker<T>(
  queue: string,
  connection: RedisClient,
  process: (job: Job<T, void, string>, signal: AbortSignal) => Promise<void>,
  options: {
    concurrency: number;
    logger: Logger;
    what: string;
    /** The queue's key prefix; the eval queue's by default. */
    prefix?: string;
    lockMs?: number;
    maxStalledCount?: number;
    /** How long `close` lets the jobs in progress finish (`WORKERS_SHUTDOWN_GRACE`). */
    graceMs: number;
  },
): EvalWorker {
  const { logger, what } = options;
  /** The jobs this worker is processing, until their processor settles. */
  const running = new Set<Promise<void>>();
  const worker = new Worker<T, void, string>(
    queue,
    (job, _token, signal) => {
      const processed = process(job, signal ?? new AbortController().signal);
      const settled = processed.then(
        () => {},
        () => {},
      );
      running.add(settled);
      void settled.then(() => running.delete(settled));
      return processed;
    },
    {
      connection,
      prefix: options.prefix ?? EVAL_QUEUE_PREFIX,
      concurrency: options.concurrency,
      ...(options.lockMs ? { lockDuration: options.lockMs, stalledInterval: options.lockMs } : {}),
      ...(options.maxStalledCount !== undefined ? { maxStalledCount: options.maxStalledCount } : {}),
    },
  );
  worker.on("error", (err) => logger.warn({ err: err.message }, `${what} worker error`));
  worker.on("failed", (job, err) =>
    logger.warn({ jobId: job?.id, job: job?.name, err: err.message }, `${what} job failed`),
  );
  return { close: () => closeWorker(worker, running, options.graceMs) };
}

/**
 * Closes a BullMQ worker whose jobs in progress are `running`: it takes no more, lets those finish
 * for `graceMs` (`WORKERS_SHUTDOWN_GRACE`), then aborts their signals (each ends as its processor
 * says: a background response `failed`, saying the service stopped), and closes without waiting on
 * Redis. BullMQ's own graceful close waits for its blocking connection to end, and ioredis never ends
 * a connection that is between two reconnection attempts (Redis down, or just back): that close could
 * wait forever.
 */
export async function closeWorker(
  worker: Pick<Worker, "pause" | "cancelAllJobs" | "close">,
  running: ReadonlySet<Promise<unknown>>,
  graceMs: number,
): Promise<void> {
  await worker.pause(true);
  const cut = setTimeout(() => worker.cancelAllJobs("shutting down"), graceMs);
  try {
    while (running.size > 0) await Promise.all(running);
  } finally {
    clearTimeout(cut);
  }
  await worker.close(true);
}

async function tick(deps: EvalWorkerDeps, { org, scheduleId }: TickJob): Promise<void> {
  const runId = newEvalId(RUN_PREFIX);
  const enqueued = await deps.store.enqueue(org, scheduleId, runId, unixSeconds(deps.clock.wall()));
  switch (enqueued.outcome) {
    case "queued":
      try {
        await deps.queue.addRun({ org, scheduleId, runId }, enqueued.backlog);
      } catch (err) {
        await deps.store.abandon(
          org,
          scheduleId,
          runId,
          unixSeconds(deps.clock.wall()),
          "The run could not be queued",
        );
        throw err;
      }
      return;
    case "busy":
      deps.metrics.runs.inc({ outcome: "skipped" });
      return;
    case "deleted":
    case "missing":
      // The delete removed the job scheduler already, unless it failed half-way; finish its work.
      deps.metrics.runs.inc({ outcome: "dropped" });
      await deps.queue.unschedule(scheduleId);
      return;
  }
}

async function run(deps: EvalWorkerDeps, job: Job<RunJob>, signal: AbortSignal): Promise<void> {
  const { org, scheduleId, runId } = job.data;
  const started = await deps.store.start(org, scheduleId, runId, unixSeconds(deps.clock.wall()));
  switch (started.outcome) {
    case "deleted":
      deps.metrics.runs.inc({ outcome: "dropped" });
      return;
    case "interrupted":
      deps.metrics.runs.inc({ outcome: "failed" });
      return;
    case "gone":
      return;
    case "started": {
      const begun = performance.now();
      const outcome = await executeRun(deps, started.schedule, org, runId, signal);
      deps.metrics.runs.inc({ outcome });
      deps.metrics.duration.observe({ outcome }, (performance.now() - begun) / 1000);
    }
  }
}
