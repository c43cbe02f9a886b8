import type { ResourceAuthorization } from "@gw/core/authz";
import type { Clock } from "@gw/core/clock";
import type { Logger } from "@gw/core/logger";
import type { Postgres } from "@gw/core/postgres";
import type { RedisClient } from "@gw/core/redis";
import type { EmbeddingCallDeps } from "../calls/embeddings.ts";
import type { ServiceConfig } from "../config.ts";
import { RedisCreatorKeys } from "../evals/creator.ts";
import { bullConnection } from "../evals/queue.ts";
import type { Files } from "../files/files.ts";
import type { Ids } from "../ids.ts";
import { type Embedder, noEmbedder, pipelineEmbedder } from "./ingestion/embedder.ts";
import { IngestQueue } from "./ingestion/queue.ts";
import {
  type IngestionHooks,
  type IngestWorker,
  type IngestWorkerTimings,
  startIngestWorker,
} from "./ingestion/worker.ts";
import { createVectorIndex } from "./pgvector-index.ts";
import { VectorStoreStore } from "./store.ts";
import type { VectorIndex } from "./vector-index.ts";
import { VectorStores } from "./vector-stores.ts";

export { VectorStores } from "./vector-stores.ts";

/** Test seams of the vector stores of a process (production passes none). */
export interface VectorStoreTestOptions {
  /** The embedder the ingestion calls; the process's own by default. */
  embedder?: Embedder;
  hooks?: IngestionHooks;
  timings?: IngestWorkerTimings;
}

/** The vector index of a process, on `VECTOR_DATABASE_URL`. */
export const vectorIndexOf = (
  config: Pick<ServiceConfig, "VECTOR_DATABASE_URL" | "VECTOR_DATABASE_MAX_CONNECTIONS">,
  logger: Logger,
): VectorIndex =>
  createVectorIndex({
    url: config.VECTOR_DATABASE_URL,
    maxConnections: config.VECTOR_DATABASE_MAX_CONNECTIONS,
    onIdleError: (err) => logger.warn({ err: err.message }, "vector database connection error"),
  });

/**
 * The ingestion workers of a process (the service's, or an eval worker
 * process's): `VECTOR_STORE_INGEST_CONCURRENCY` files at a time, none with 0.
 */
export function startIngestion(
  config: Pick<
    ServiceConfig,
    | "REDIS_URL"
    | "VECTOR_STORE_INGEST_CONCURRENCY"
    | "VECTOR_STORE_EMBEDDING_MODEL"
    | "WORKERS_SHUTDOWN_GRACE"
  >,
  deps: {
    db: Postgres;
    redis: RedisClient;
    index: VectorIndex;
    files: Files;
    clock: Clock;
    logger: Logger;
    /** The model-call pipeline the embeddings go through (charged to the key that attached each file). */
    embedding?: EmbeddingCallDeps | undefined;
  },
  test: VectorStoreTestOptions = {},
): { close(): Promise<void> } {
  if (config.VECTOR_STORE_INGEST_CONCURRENCY === 0) return { close: async () => undefined };
  const connection = bullConnection(config.REDIS_URL, "worker");
  const worker: IngestWorker = startIngestWorker(
    connection,
    {
      store: new VectorStoreStore(deps.db, deps.clock),
      index: deps.index,
      files: deps.files,
      embedder: test.embedder ?? (deps.embedding ? pipelineEmbedder(deps.embedding) : noEmbedder),
      keys: new RedisCreatorKeys(deps.redis, deps.clock),
      embeddingModel: config.VECTOR_STORE_EMBEDDING_MODEL,
      logger: deps.logger,
      hooks: test.hooks,
    },
    config.VECTOR_STORE_INGEST_CONCURRENCY,
    config.WORKERS_SHUTDOWN_GRACE,
    test.timings,
  );
  return {
    async close() {
      await worker.close();
      connection.disconnect();
    },
  };
}

/** The vector stores of the service: records, index, ingestion queue, ownership. */
export function vectorStoresOf(
  config: Pick<ServiceConfig, "REDIS_URL">,
  deps: {
    db: Postgres;
    clock: Clock;
    index: VectorIndex;
    files: Files;
    authorization: ResourceAuthorization;
    ids: Ids;
    logger: Logger;
  },
): { vectorStores: VectorStores; close(): Promise<void> } {
  const producer = bullConnection(config.REDIS_URL, "producer");
  const queue = new IngestQueue(producer, (err) =>
    deps.logger.warn({ err: err.message }, "ingestion queue error"),
  );
  const vectorStores = new VectorStores({ ...deps, store: new VectorStoreStore(deps.db, deps.clock), queue });
  return {
    vectorStores,
    async close() {
      await queue.close();
      producer.disconnect();
    },
  };
}
