import { AppError } from "@gw/core/errors";
import type { Logger } from "@gw/core/logger";
import type { RedisClient } from "@gw/core/redis";
import { type Job, Worker } from "bullmq";
import { BudgetRefused } from "../../budgets/admit-model-call.ts";
import type { CreatorKeys, KeyPurpose } from "../../evals/creator.ts";
import { closeWorker } from "../../evals/worker.ts";
import type { Files } from "../../files/files.ts";
import { ProviderError } from "../../llm/errors.ts";
import type { FileError, FileRefInStore, VectorStoreStore } from "../store.ts";
import { type ChunkInput, MAX_EMBEDDING_DIMENSIONS, type VectorIndex } from "../vector-index.ts";
import { chunkText, type TextChunk } from "./chunk.ts";
import { type Embedder, EmbeddingsUnavailable } from "./embedder.ts";
import { extractText, FileRejected } from "./extract.ts";
import { INGEST_QUEUE, INGEST_QUEUE_PREFIX, type IngestJob, MAX_INGEST_ATTEMPTS } from "./queue.ts";

/** Chunks embedded in one call of the embedding model. */
export const EMBED_BATCH = 64;
/** The largest file an ingestion reads (its text is held in memory while it is chunked). */
export const MAX_INGESTED_BYTES = 64 * 1024 * 1024;
/** How long a stopping worker lets its ingestions finish before it cuts them short (they are taken again). */

/** What the ingestion needs of the key that attached a file. */
export const INGESTION: KeyPurpose = {
  needs: [
    { permission: "vector_stores:write", why: "" },
    { permission: "responses:write", why: ", which embeddings need" },
  ],
  key: "The API key that attached the file",
  endUser: "The end user who attached the file",
};

/** Seams a test injects (production passes none). */
export interface IngestionHooks {
  /** Awaited once a batch of a file's chunks is staged, with how many are staged so far. */
  afterBatch?: (file: FileRefInStore, staged: number) => Promise<void>;
}

export interface IngestionDeps {
  store: VectorStoreStore;
  index: VectorIndex;
  files: Files;
  embedder: Embedder;
  /** The key that attached a file, as it stands now. */
  keys: CreatorKeys;
  /** `VECTOR_STORE_EMBEDDING_MODEL`. */
  embeddingModel: string;
  logger: Logger;
  hooks?: IngestionHooks | undefined;
}

/** BullMQ's timings of a worker (tests shorten them); BullMQ's own defaults otherwise. */
export interface IngestWorkerTimings {
  /** How long a job stays this worker's without its lock being renewed (a killed worker's job is taken again after it). */
  lockDurationMs?: number;
  /** How often this worker looks for jobs whose worker died. */
  stalledIntervalMs?: number;
}

/** Bytes a chunk takes in the store: its text, and its embedding as 4-byte floats. */
const chunkBytes = (chunk: TextChunk, width: number) => Buffer.byteLength(chunk.text, "utf8") + 4 * width;

async function readAll(
  files: Files,
  org: string,
  fileId: string,
): Promise<{ bytes: Buffer; filename: string; contentType: string }> {
  const file = await files.get(org, fileId);
  if (!file) throw new FileRejected("invalid_file", "The file was deleted or has expired");
  if (file.bytes > MAX_INGESTED_BYTES)
    throw new FileRejected(
      "invalid_file",
      `The file is larger than the ${MAX_INGESTED_BYTES} bytes a vector store indexes from one file`,
    );
  const pieces: Buffer[] = [];
  // A file deleted while it is read fails the read (FileGoneWhileRead) rather than ending short.
  for await (const piece of files.content({ org, id: fileId, bytes: file.bytes })) pieces.push(piece);
  return { bytes: Buffer.concat(pieces), filename: file.filename, contentType: file.contentType };
}

/** The error a file is left with when its ingestion fails on something other than the file itself. */
function serverError(err: unknown, interrupted: boolean): FileError {
  if (interrupted) return { code: "server_error", message: "The worker stopped before the file was indexed" };
  if (err instanceof BudgetRefused)
    return {
      code: "server_error",
      message: `Refused by a budget of the key that attached the file: ${err.message}`,
    };
  if (err instanceof EmbeddingsUnavailable || err instanceof ProviderError || err instanceof AppError)
    return { code: "server_error", message: err.message };
  return { code: "server_error", message: "The file could not be indexed" };
}

/**
 * One attempt at one ingestion of a file (`job.data.generation`): read the
 * file, extract its text, cut it into chunks, embed them a batch at a time
 * as the key that attached the file, stage each batch where no search reads
 * it, then publish them all in one transaction and mark the file
 * `completed`. Between batches it stops if the ingestion is no longer the
 * file's current one (the file removed, cancelled or attached again). A
 * file that cannot be read ends `failed` at once; another error is retried
 * by the queue, and the last attempt's ends it `failed`. A worker that dies
 * leaves only staged chunks (discarded by the next attempt, or by age).
 */
export async function ingestFile(
  deps: IngestionDeps,
  job: Pick<Job<IngestJob>, "data" | "attemptsMade" | "opts">,
  signal: AbortSignal,
): Promise<"completed" | "failed" | "dropped" | "retry"> {
  const { org, vectorStoreId, fileId, generation } = job.data;
  const ref: FileRefInStore = { org, vectorStoreId, fileId };
  const row = await deps.store.beginAttempt(ref, generation);
  if (!row) return "dropped";
  // What an earlier attempt of this ingestion staged before its worker died.
  await deps.index.discardStaged(ref, generation);
  if (row.attempts > MAX_INGEST_ATTEMPTS) {
    await deps.store.finish(ref, generation, {
      status: "failed",
      error: {
        code: "server_error",
        message: `The file's indexing was interrupted ${MAX_INGEST_ATTEMPTS} times`,
      },
    });
    return "failed";
  }
  try {
    const { bytes, filename, contentType } = await readAll(deps.files, org, fileId);
    const text = await extractText(bytes, filename, contentType);
    const chunks = await chunkText(text, row.chunking, deps.embeddingModel);
    if (chunks.length === 0) throw new FileRejected("invalid_file", "The file has no text to index");
    const caller = await deps.keys.callerOf(org, row.attachedBy, INGESTION);
    if ("refused" in caller) throw new FileRejected("server_error", caller.refused);
    let usageBytes = 0;
    let width: number | undefined;
    for (let start = 0; start < chunks.length; start += EMBED_BATCH) {
      if (!(await deps.store.stillIngesting(ref, generation))) {
        await deps.index.discardStaged(ref, generation);
        return "dropped";
      }
      const batch = chunks.slice(start, start + EMBED_BATCH);
      const { vectors } = await deps.embedder.embed(
        {
          caller: { ...caller, requestId: generation },
          model: deps.embeddingModel,
          texts: batch.map((c) => c.text),
        },
        signal,
      );
      if (vectors.length !== batch.length) throw new Error("the embedder answered another number of vectors");
      width ??= vectors[0]?.length ?? 0;
      if (width < 1 || width > MAX_EMBEDDING_DIMENSIONS || vectors.some((v) => v.length !== width))
        throw new FileRejected(
          "server_error",
          `The embedding model answered vectors of a width other than 1 to ${MAX_EMBEDDING_DIMENSIONS}, the same for every chunk`,
        );
      const inputs: ChunkInput[] = batch.map((chunk, i) => ({
        index: start + i,
        text: chunk.text,
        tokenCount: chunk.tokenCount,
        embedding: vectors[i]!,
      }));
      await deps.index.stage(ref, generation, inputs);
      for (const chunk of batch) usageBytes += chunkBytes(chunk, width);
      await deps.hooks?.afterBatch?.(ref, start + batch.length);
    }
    const attributes = await deps.store.attributesOf(ref);
    if (attributes === undefined || !(await deps.store.stillIngesting(ref, generation))) {
      await deps.index.discardStaged(ref, generation);
      return "dropped";
    }
    await deps.index.publish(ref, generation, chunks.length, attributes);
    if (!(await deps.store.finish(ref, generation, { status: "completed", usageBytes }))) {
      // Removed or cancelled while it was published: its chunks are not the file's. (Attached again: the
      // newer ingestion replaces them when it publishes.)
      if (!(await deps.store.stillIngestingAny(ref))) await deps.index.deleteFile(ref);
      return "dropped";
    }
    return "completed";
  } catch (err) {
    await deps.index.discardStaged(ref, generation).catch(() => undefined);
    const last = job.attemptsMade + 1 >= (job.opts.attempts ?? 1);
    if (!(err instanceof FileRejected) && !last) {
      deps.logger.warn(
        { err: (err as Error).message, file: fileId, vectorStoreId },
        "file ingestion failed; retried",
      );
      return "retry";
    }
    const error: FileError =
      err instanceof FileRejected
        ? { code: err.code, message: err.message }
        : serverError(err, signal.aborted);
    if (!(err instanceof FileRejected))
      deps.logger.error({ err, file: fileId, vectorStoreId }, "file ingestion failed");
    await deps.store.finish(ref, generation, { status: "failed", error });
    return "failed";
  }
}

export interface IngestWorker {
  close(): Promise<void>;
}

/**
 * Processes the ingestion queue, `concurrency` files at a time. Any number
 * of these workers, in the service or in eval worker processes, may share
 * one Redis; a file's job whose worker died is taken again by another once
 * its lock expires (BullMQ's stalled jobs).
 */
export function startIngestWorker(
  connection: RedisClient,
  deps: IngestionDeps,
  concurrency: number,
  /** How long `close` lets the files in progress finish (`WORKERS_SHUTDOWN_GRACE`). */
  graceMs: number,
  timings: IngestWorkerTimings = {},
): IngestWorker {
  const running = new Set<Promise<unknown>>();
  const worker = new Worker<IngestJob, void, "ingest">(
    INGEST_QUEUE,
    async (job, _token, signal) => {
      const processed = ingestFile(deps, job, signal ?? new AbortController().signal);
      const settled = processed.catch(() => undefined);
      running.add(settled);
      void settled.then(() => running.delete(settled));
      // A retry is the queue's: the job fails this attempt and is tried again after its backoff.
      if ((await processed) === "retry") throw new Error("ingestion failed; retried");
    },
    {
      connection,
      prefix: INGEST_QUEUE_PREFIX,
      concurrency,
      // The row counts the attempts (`MAX_INGEST_ATTEMPTS`): a job found stalled is always taken again.
      maxStalledCount: MAX_INGEST_ATTEMPTS + 1,
      ...(timings.lockDurationMs ? { lockDuration: timings.lockDurationMs } : {}),
      ...(timings.stalledIntervalMs ? { stalledInterval: timings.stalledIntervalMs } : {}),
    },
  );
  worker.on("error", (err) => deps.logger.warn({ err: err.message }, "ingestion worker error"));
  return { close: () => closeWorker(worker, running, graceMs) };
}
