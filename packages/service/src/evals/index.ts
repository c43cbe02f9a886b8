import type { Logger, Metrics, RedisClient } from "@gw/core";
import type { ChatProvider } from "../llm/provider.ts";
import type { UsageStore } from "../usage/store.ts";
import { createEvalMetrics } from "./metrics.ts";
import { bullConnection, EvalQueue } from "./queue.ts";
import { EvalStore } from "./store.ts";
import { type EvalWorker, startEvalWorker } from "./worker.ts";

/** What one organization may schedule (`EVAL_MAX_SCHEDULES_PER_ORG`, `EVAL_MIN_INTERVAL_SECONDS`). */
export interface EvalLimits {
  maxSchedulesPerOrg: number;
  minIntervalSeconds: number;
}

export interface Evals {
  store: EvalStore;
  queue: EvalQueue;
  limits: EvalLimits;
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
    provider: ChatProvider;
    usage: UsageStore;
    logger: Logger;
    metrics: Metrics;
  },
  workers: number,
  limits: EvalLimits,
): Evals {
  const producer = bullConnection(deps.redisUrl, "producer");
  const store = new EvalStore(deps.redis);
  const queue = new EvalQueue(producer, (err) => deps.logger.warn({ err: err.message }, "eval queue error"));
  const metrics = createEvalMetrics(deps.metrics, () => queue.depth());
  let worker: EvalWorker | undefined;
  let workerConnection: RedisClient | undefined;
  if (workers > 0) {
    workerConnection = bullConnection(deps.redisUrl, "worker");
    worker = startEvalWorker(workerConnection, { ...deps, store, queue, metrics }, workers);
  }
  return {
    store,
    queue,
    limits,
    async close() {
      await worker?.close();
      await queue.close();
      workerConnection?.disconnect();
      producer.disconnect();
    },
  };
}

export const evalLimits = (config: {
  EVAL_MAX_SCHEDULES_PER_ORG: number;
  EVAL_MIN_INTERVAL_SECONDS: number;
}): EvalLimits => ({
  maxSchedulesPerOrg: config.EVAL_MAX_SCHEDULES_PER_ORG,
  minIntervalSeconds: config.EVAL_MIN_INTERVAL_SECONDS,
});
