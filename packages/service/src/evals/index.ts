import type { Clock } from "@gw/core/clock";
import type { Logger } from "@gw/core/logger";
import type { Metrics } from "@gw/core/metrics";
import type { Postgres } from "@gw/core/postgres";
import type { RedisClient } from "@gw/core/redis";
import type { BudgetDeps } from "../budgets/admit-model-call.ts";
import type { ModelGuardrails } from "../calls/guardrails.ts";
import type { ServiceConfig } from "../config.ts";
import type { ChatProvider } from "../llm/provider.ts";
import type { UsageStore } from "../usage/store.ts";
import { RedisCreatorKeys } from "./creator.ts";
import { createEvalMetrics } from "./metrics.ts";
import { bullConnection, EvalQueue } from "./queue.ts";
import { EvalStore } from "./store.ts";
import { type EvalWorker, startEvalWorker } from "./worker.ts";

/** What one organization may schedule (`EVAL_MAX_SCHEDULES_PER_ORG`, `EVAL_MIN_INTERVAL_SECONDS`). */
export interface EvalLimits {
  maxSchedulesPerOrg: number;
  minIntervalSeconds: number;
}

/** How long runs are kept (`EVAL_RUN_RETENTION`) and how many per schedule (`EVAL_RUNS_PER_SCHEDULE`). */
export interface EvalRetention {
  runRetentionMs: number;
  runsPerSchedule: number;
}

/** How often each process deletes expired runs (the sweeps of several processes skip each other's rows). */
const SWEEP_INTERVAL_MS = 60_000;

export interface Evals {
  store: EvalStore;
  queue: EvalQueue;
  limits: EvalLimits;
  /** The process's clock: schedules and runs are stamped with its wall time. */
  clock: Clock;
  close(): Promise<void>;
}

/**
 * Eval schedules for one process: the store, the queue, and `workers` runs
 * processed at a time in this process (none with 0).
 */
export function startEvals(
  deps: {
    redisUrl: string;
    redis: RedisClient;
    /** Schedules and runs. */
    db: Postgres;
    retention: EvalRetention;
    provider: ChatProvider;
    usage: UsageStore;
    /** Runs are admitted under their creator key's budgets, as responses are. */
    budgets: BudgetDeps;
    /** Runs' calls are checked by the guardrails attached for their creator key, as responses are. */
    modelGuardrails?: ModelGuardrails | undefined;
    logger: Logger;
    metrics: Metrics;
    clock: Clock;
    /** How long runs in progress may finish when the process stops (`WORKERS_SHUTDOWN_GRACE`). */
    shutdownGraceMs: number;
  },
  workers: number,
  limits: EvalLimits,
): Evals {
  const producer = bullConnection(deps.redisUrl, "producer");
  const store = new EvalStore(deps.db, { ...deps.retention, clock: deps.clock });
  const sweep = setInterval(() => {
    store.sweep().then(
      (deleted) =>
        deleted.runs + deleted.schedules > 0 && deps.logger.info({ deleted }, "expired eval runs deleted"),
      (err: unknown) => deps.logger.warn({ err: (err as Error).message }, "eval retention sweep failed"),
    );
  }, SWEEP_INTERVAL_MS);
  sweep.unref();
  const queue = new EvalQueue(producer, (err) => deps.logger.warn({ err: err.message }, "eval queue error"));
  const metrics = createEvalMetrics(deps.metrics, () => queue.depth());
  let worker: EvalWorker | undefined;
  let workerConnection: RedisClient | undefined;
  if (workers > 0) {
    workerConnection = bullConnection(deps.redisUrl, "worker");
    const creators = new RedisCreatorKeys(deps.redis, deps.clock);
    worker = startEvalWorker(
      workerConnection,
      { ...deps, store, queue, metrics, creators },
      workers,
      deps.shutdownGraceMs,
    );
  }
  return {
    store,
    queue,
    limits,
    clock: deps.clock,
    async close() {
      clearInterval(sweep);
      await worker?.close();
      await queue.close();
      workerConnection?.disconnect();
      producer.disconnect();
    },
  };
}

/** The settings a process starts its evals from. */
type EvalSettings = Pick<
  ServiceConfig,
  | "REDIS_URL"
  | "EVAL_RUN_RETENTION"
  | "EVAL_RUNS_PER_SCHEDULE"
  | "EVAL_WORKER_CONCURRENCY"
  | "EVAL_MAX_SCHEDULES_PER_ORG"
  | "EVAL_MIN_INTERVAL_SECONDS"
  | "WORKERS_SHUTDOWN_GRACE"
>;

/**
 * `startEvals` as the service and the eval worker process start it: the queue on `REDIS_URL`,
 * `EVAL_WORKER_CONCURRENCY` runs at a time, and the retention and limits their settings give.
 */
export function startEvalsFromConfig(
  config: EvalSettings,
  deps: Omit<Parameters<typeof startEvals>[0], "redisUrl" | "retention" | "shutdownGraceMs">,
): Evals {
  return startEvals(
    {
      ...deps,
      redisUrl: config.REDIS_URL,
      shutdownGraceMs: config.WORKERS_SHUTDOWN_GRACE,
      retention: {
        runRetentionMs: config.EVAL_RUN_RETENTION,
        runsPerSchedule: config.EVAL_RUNS_PER_SCHEDULE,
      },
    },
    config.EVAL_WORKER_CONCURRENCY,
    {
      maxSchedulesPerOrg: config.EVAL_MAX_SCHEDULES_PER_ORG,
      minIntervalSeconds: config.EVAL_MIN_INTERVAL_SECONDS,
    },
  );
}
