import { type ChildProcess, fork } from "node:child_process";
import { join } from "node:path";
import { systemClock } from "@gw/core/clock";
import { createLogger } from "@gw/core/logger";
import { afterAll, describe, expect, it } from "vitest";
import { uploaded } from "../../../test/files.ts";
import {
  chunksOf,
  settled,
  testEmbedder,
  useVectorStack,
  VECTOR_STORES,
} from "../../../test/vector-stores.ts";
import { RedisCreatorKeys } from "../../evals/creator.ts";
import { bullConnection } from "../../evals/queue.ts";
import { VectorStoreStore } from "../store.ts";
import { chunkText } from "./chunk.ts";
import { EMBED_BATCH, startIngestWorker } from "./worker.ts";

// The service indexes nothing itself: only the workers this test starts do.
const { stack, vectorDatabase } = useVectorStack({ env: { VECTOR_STORE_INGEST_CONCURRENCY: "0" } });
const LOCK_MS = 1_500;
let child: ChildProcess | undefined;
afterAll(() => child?.kill("SIGKILL"));

/** Words enough for more than two batches of 100-token chunks. */
const LONG_TEXT = Array.from({ length: EMBED_BATCH * 2 * 100 + 500 }, (_, i) => `w${i % 997}`).join(" ");

describe("a worker killed in the middle of a file", () => {
  it("leaves nothing of the file searchable, and the file is indexed whole by another worker", async () => {
    const key = await stack.createKey();
    const file = await uploaded(stack, key.secret, { content: LONG_TEXT, user: "alice" });
    const store = await (
      await stack.call(key.secret, VECTOR_STORES, {
        json: {
          file_ids: [file.id],
          chunking_strategy: {
            type: "static",
            static: { max_chunk_size_tokens: 100, chunk_overlap_tokens: 0 },
          },
        },
        user: "alice",
      })
    ).json();
    child = fork(join(import.meta.dirname, "../../../test/ingest-worker-child.ts"), [], {
      env: {
        PATH: process.env.PATH,
        REDIS_URL: stack.redisUrl,
        DATABASE_URL: stack.database.url,
        VECTOR_DATABASE_URL: vectorDatabase.url,
        LOCK_MS: String(LOCK_MS),
      },
      execArgv: [],
      stdio: ["ignore", "inherit", "inherit", "ipc"],
    });
    const staged = await new Promise<number>((resolve, reject) => {
      child!.on("message", (m: { staged?: number }) => m.staged !== undefined && resolve(m.staged));
      child!.once("exit", (code) =>
        reject(new Error(`the worker exited (${code}) before it staged a batch`)),
      );
    });
    expect(staged).toBe(EMBED_BATCH);
    // Killed between two batches: one batch staged, none published.
    const exited = new Promise((r) => child!.once("exit", r));
    child.kill("SIGKILL");
    await exited;
    child = undefined;
    const path = `${VECTOR_STORES}/${store.id}/files/${file.id}`;
    expect((await (await stack.call(key.secret, path, { user: "alice" })).json()).status).toBe("in_progress");
    expect(await chunksOf(stack, key.org, store.id)).toEqual([]);

    // Another worker takes the job once the dead one's lock has expired, and indexes the whole file once.
    const connection = bullConnection(stack.redisUrl, "worker");
    const worker = startIngestWorker(
      connection,
      {
        store: new VectorStoreStore(stack.db, systemClock),
        index: stack.vectorStores.index,
        files: stack.files,
        embedder: testEmbedder(),
        keys: new RedisCreatorKeys(stack.redis, systemClock),
        embeddingModel: "text-embedding-3-small",
        logger: createLogger("ingest-test", "silent"),
      },
      1,
      10_000,
      { lockDurationMs: LOCK_MS, stalledIntervalMs: 500 },
    );
    try {
      const done = await settled(stack, key.secret, store.id, file.id);
      expect(done).toMatchObject({ status: "completed", last_error: null });
      const chunks = await chunksOf(stack, key.org, store.id);
      expect(chunks.length).toBeGreaterThan(2 * EMBED_BATCH);
      // Each chunk once, in order: nothing of the dead worker's batch is left beside the new ones.
      const expected = await chunkText(
        LONG_TEXT,
        { maxChunkSizeTokens: 100, chunkOverlapTokens: 0 },
        "text-embedding-3-small",
      );
      expect(chunks.map((c) => c.text)).toEqual(expected.map((c) => c.text));
      const got = await (
        await stack.call(key.secret, `${VECTOR_STORES}/${store.id}`, { user: "alice" })
      ).json();
      expect(got.file_counts).toEqual({ in_progress: 0, completed: 1, failed: 0, cancelled: 0, total: 1 });
      const { rows } = await stack.db.query<{ attempts: number }>(
        "SELECT attempts FROM vector_store_files WHERE org = $1 AND file_id = $2",
        [key.org, file.id],
      );
      expect(rows[0]!.attempts).toBe(2);
    } finally {
      await worker.close();
      connection.disconnect();
    }
  }, 60_000);
});
