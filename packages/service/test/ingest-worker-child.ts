/**
 * An ingestion worker in a process of its own, for a test that kills it
 * mid-file: the real ingestion (`startIngestion`) on the stack's Redis,
 * PostgreSQL and vector database (from the environment), with the test
 * embedder and a hook that, once the first batch of a file is staged, tells
 * the parent (IPC `{staged}`) and waits for ever: the parent kills it there.
 */
import { systemClock } from "@gw/core/clock";
import { createLogger } from "@gw/core/logger";
import { createPostgres } from "@gw/core/postgres";
import { createRedis } from "@gw/core/redis";
import { Files } from "../src/files/files.ts";
import { startIngestion, vectorIndexOf } from "../src/vector-stores/index.ts";
import { testEmbedder } from "./test-embedder.ts";

const env = process.env as Record<string, string>;
const logger = createLogger("ingest-child", "warn");
const db = createPostgres(env.DATABASE_URL!, { connectionName: "ingest-child" });
const redis = createRedis(env.REDIS_URL!, { connectionName: "ingest-child" });
const index = vectorIndexOf(
  { VECTOR_DATABASE_URL: env.VECTOR_DATABASE_URL!, VECTOR_DATABASE_MAX_CONNECTIONS: 1 },
  logger,
);
startIngestion(
  {
    REDIS_URL: env.REDIS_URL!,
    VECTOR_STORE_INGEST_CONCURRENCY: 1,
    VECTOR_STORE_EMBEDDING_MODEL: "text-embedding-3-small",
    WORKERS_SHUTDOWN_GRACE: 10_000,
  },
  {
    db,
    redis,
    index,
    files: new Files(db, {
      clock: systemClock,
      options: { maxBytes: 1 << 30, quotaBytes: 1 << 30, retentionMs: 86_400_000 },
    }),
    clock: systemClock,
    logger,
  },
  {
    embedder: testEmbedder(),
    hooks: {
      afterBatch: async (_file, staged) => {
        process.send?.({ staged });
        await new Promise(() => undefined);
      },
    },
    // Short, as the test's worker's: the queue runs the stalled-job check at most once per interval of whoever ran it last.
    timings: { lockDurationMs: Number(env.LOCK_MS), stalledIntervalMs: 500 },
  },
);
process.send?.({ ready: true });
