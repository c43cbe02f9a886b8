import type { RedisClient } from "@gw/core/redis";
import { Queue } from "bullmq";

export const INGEST_QUEUE = "vector-store-files";
/** The hash tag puts every key of the queue in one Redis Cluster slot, as BullMQ's scripts need. */
export const INGEST_QUEUE_PREFIX = "gw:{vector-stores}";

/**
 * Times a worker may begin one ingestion of a file, counting those that a
 * dead worker left (its job found stalled and taken again) and retries
 * after an error; past it the file is `failed`.
 */
export const MAX_INGEST_ATTEMPTS = 3;

/** One ingestion of a file of a store: its job id is `generation`, so an ingestion is never queued twice. */
export interface IngestJob {
  org: string;
  vectorStoreId: string;
  fileId: string;
  generation: string;
}

// What a file's ingestion did lives in its row. Failed jobs stay a day for inspection.
const JOB_OPTIONS = {
  attempts: MAX_INGEST_ATTEMPTS,
  backoff: { type: "exponential", delay: 1_000 },
  removeOnComplete: true,
  removeOnFail: { age: 86_400 },
} as const;

/** The ingestion queue, on the Redis and the BullMQ setup of the eval queue (`evals/queue.ts`). */
export class IngestQueue {
  private readonly queue: Queue<IngestJob, void, "ingest">;

  constructor(connection: RedisClient, onError: (err: Error) => void) {
    this.queue = new Queue(INGEST_QUEUE, { connection, prefix: INGEST_QUEUE_PREFIX });
    this.queue.on("error", onError);
  }

  async add(jobs: readonly IngestJob[]): Promise<void> {
    if (jobs.length === 0) return;
    await this.queue.addBulk(
      jobs.map((data) => ({
        name: "ingest" as const,
        data,
        opts: { ...JOB_OPTIONS, jobId: data.generation },
      })),
    );
  }

  async depth(): Promise<{ waiting: number; active: number; delayed: number }> {
    const counts = await this.queue.getJobCounts("waiting", "active", "delayed");
    return { waiting: counts.waiting ?? 0, active: counts.active ?? 0, delayed: counts.delayed ?? 0 };
  }

  async close(): Promise<void> {
    await this.queue.close();
  }
}
