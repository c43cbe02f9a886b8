import type { Clock } from "@gw/core/clock";
import type { Logger } from "@gw/core/logger";
import type { Metrics } from "@gw/core/metrics";
import { createRedis, type RedisClient } from "@gw/core/redis";
import { Queue } from "bullmq";
import { RedisCreatorKeys } from "../../evals/creator.ts";
import { bullConnection } from "../../evals/queue.ts";
import { type EvalWorker, startQueueWorker } from "../../evals/worker.ts";
import type { ResponseTurnDeps } from "../response-turn.ts";
import { CancelSignals } from "./cancels.ts";
import { ResponseEvents } from "./events.ts";
import { createBackgroundMetrics } from "./metrics.ts";
import { type BackgroundJob, type BackgroundRunDeps, runBackgroundResponse } from "./run.ts";
import { BackgroundSlots } from "./slots.ts";

/** The BullMQ queue background responses run from, beside the eval runs' (the same connections and worker). */
export const BACKGROUND_QUEUE = "background-responses";
/** Its keys' prefix: the hash tag puts every key of the queue in one Redis Cluster slot, as BullMQ's scripts need. */
export const BACKGROUND_QUEUE_PREFIX = "gw:{background}";

/** The settings of background responses (config.ts). */
export interface BackgroundSettings {
  REDIS_URL: string;
  /** Background responses this process runs at a time (0: none; other processes run them). */
  BACKGROUND_RESPONSE_CONCURRENCY: number;
  BACKGROUND_RESPONSES_PER_KEY: number;
  BACKGROUND_RESPONSE_STALL_TIMEOUT: number;
  BACKGROUND_RESPONSE_EVENTS_TTL: number;
  BACKGROUND_RESPONSE_MAX_EVENTS: number;
  /** How long runs in progress may finish when the process stops (`closeWorker`). */
  WORKERS_SHUTDOWN_GRACE: number;
}

/** Background responses as the routes use them: queue one, its events, cancels, the keys' slots. */
export interface BackgroundResponses {
  enqueue(job: BackgroundJob): Promise<void>;
  /**
   * Drops a queued response's job (cancelled before a worker took it) and
   * gives its creator key's slot back; a job a worker holds is left to it.
   */
  dequeue(responseId: string): Promise<void>;
  events: ResponseEvents;
  cancels: CancelSignals;
  slots: BackgroundSlots;
  /** `BACKGROUND_RESPONSES_PER_KEY`. */
  perKey: number;
  /** A connection of the caller's own for reading events as they come (`ResponseEvents.read`); disconnect it after. */
  reader(): RedisClient;
  close(): Promise<void>;
}

/** How long a key's slot may be held at most, should its run never give it back (a day). */
const SLOT_MAX_AGE_MS = 86_400_000;

/**
 * Background responses for one process: the queue (on the evals' BullMQ
 * connections), and `BACKGROUND_RESPONSE_CONCURRENCY` runs at a time in
 * this process. A run whose worker died is handed out again by BullMQ's
 * stall check once its lock (`BACKGROUND_RESPONSE_STALL_TIMEOUT`) lapses,
 * and ends failed (`runBackgroundResponse`).
 */
export function startBackgroundResponses(
  config: BackgroundSettings,
  deps: ResponseTurnDeps & {
    redis: RedisClient;
    logger: Logger;
    metrics: Metrics;
    clock: Clock;
    hooks?: BackgroundRunDeps["hooks"];
  },
): BackgroundResponses {
  const producer = bullConnection(config.REDIS_URL, "producer");
  const queue = new Queue<BackgroundJob, void, string>(BACKGROUND_QUEUE, {
    connection: producer,
    prefix: BACKGROUND_QUEUE_PREFIX,
  });
  queue.on("error", (err) => deps.logger.warn({ err: err.message }, "background queue error"));
  const events = new ResponseEvents(deps.redis, {
    ttlMs: config.BACKGROUND_RESPONSE_EVENTS_TTL,
    maxEvents: config.BACKGROUND_RESPONSE_MAX_EVENTS,
  });
  const cancels = new CancelSignals(deps.redis);
  const slots = new BackgroundSlots(deps.redis, {
    limit: config.BACKGROUND_RESPONSES_PER_KEY,
    maxAgeMs: SLOT_MAX_AGE_MS,
    now: () => deps.clock.wall(),
  });
  const metrics = createBackgroundMetrics(deps.metrics, () => queue.getJobCounts("waiting", "active"));
  let worker: EvalWorker | undefined;
  let workerConnection: RedisClient | undefined;
  let subscriber: RedisClient | undefined;
  if (config.BACKGROUND_RESPONSE_CONCURRENCY > 0) {
    workerConnection = bullConnection(config.REDIS_URL, "worker");
    subscriber = createRedis(config.REDIS_URL, {
      connectionName: "service-background-cancels",
      extra: { maxRetriesPerRequest: null, commandTimeout: undefined },
    });
    void cancels
      .listen(subscriber, deps.logger)
      .catch((err: unknown) =>
        deps.logger.warn({ err: (err as Error).message }, "background cancels not heard"),
      );
    const runDeps: BackgroundRunDeps = {
      ...deps,
      creators: new RedisCreatorKeys(deps.redis, deps.clock),
      events,
      cancels,
      slots,
      finished: (status) => metrics.finished.inc({ status }),
    };
    worker = startQueueWorker<BackgroundJob>(
      BACKGROUND_QUEUE,
      workerConnection,
      (job, signal) => runBackgroundResponse(runDeps, job.data, signal),
      {
        concurrency: config.BACKGROUND_RESPONSE_CONCURRENCY,
        logger: deps.logger,
        what: "background response",
        prefix: BACKGROUND_QUEUE_PREFIX,
        lockMs: config.BACKGROUND_RESPONSE_STALL_TIMEOUT,
        // A job handed out again ends at once (failed): it stalls again only if that worker dies too.
        maxStalledCount: 3,
        graceMs: config.WORKERS_SHUTDOWN_GRACE,
      },
    );
  }
  return {
    async enqueue(job) {
      await queue.add("response", job, {
        jobId: job.responseId,
        // A run that could not start (PostgreSQL or Redis away) is tried again; the response is still queued.
        attempts: 3,
        backoff: { type: "exponential", delay: 1_000 },
        // The job holds the request's content: gone with it, whatever the outcome.
        removeOnComplete: true,
        removeOnFail: true,
      });
    },
    async dequeue(responseId) {
      const job = await queue.getJob(responseId);
      if (!job || (await queue.remove(responseId)) !== 1) return;
      await slots.give(job.data.caller.principal.keyId, responseId);
    },
    events,
    cancels,
    slots,
    perKey: config.BACKGROUND_RESPONSES_PER_KEY,
    reader: () => {
      const reader = createRedis(config.REDIS_URL, {
        connectionName: "service-background-reader",
        commandTimeoutMs: 5_000,
      });
      // A failed read ends the stream it serves (its reader sees the rejection); the event is only logged.
      reader.on("error", (err: Error) =>
        deps.logger.debug({ err: err.message }, "background response stream reader error"),
      );
      return reader;
    },
    async close() {
      await worker?.close();
      await queue.close();
      workerConnection?.disconnect();
      subscriber?.disconnect();
      producer.disconnect();
    },
  };
}
