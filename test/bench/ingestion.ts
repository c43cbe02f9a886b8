/**
 * Vector-store ingestion throughput (`BENCH_ONLY=ingestion`): chunks a
 * second with the provider's time excluded. `BENCH_INGEST_FILES` files
 * (default 200) of about 20 KB of Markdown (docs/*.md's paragraphs drawn
 * at random) go through the ingestion
 * worker's own `ingestFile` (packages/service/src/vector-stores/ingestion/
 * worker.ts): text extraction, token chunking (800/400, `auto`), embedding a
 * batch at a time, staging each batch and publishing the file into the
 * vector index on the local vector database (as vector-search.ts starts it).
 * The embedder answers at once with `hashedEmbedding` vectors (256 wide);
 * its time is measured and taken out. The file bytes, the vector store's
 * rows and the key are in memory (their PostgreSQL and Redis round trips
 * are not in it). Files go one at a time (the stages' times add up to the
 * total), then `VECTOR_STORE_INGEST_CONCURRENCY`'s default (2) at a time.
 * Nothing is asserted.
 */
import { readdir, readFile } from "node:fs/promises";
import { join } from "node:path";
import { createLogger } from "@gw/core/logger";
import { migrateVectorDatabase } from "@gw/core/postgres";
import type { Principal } from "@gw/core/principal";
import { REPO_ROOT, startVectorDatabaseProcess } from "@gw/devstack";
import { hashedEmbedding } from "@gw/test-kit/llm-upstream";
import type { CreatorKeys } from "../../packages/service/src/evals/creator.ts";
import type { Files } from "../../packages/service/src/files/files.ts";
import { chunkText } from "../../packages/service/src/vector-stores/ingestion/chunk.ts";
import type { Embedder } from "../../packages/service/src/vector-stores/ingestion/embedder.ts";
import { extractText } from "../../packages/service/src/vector-stores/ingestion/extract.ts";
import { ingestFile } from "../../packages/service/src/vector-stores/ingestion/worker.ts";
import { PgVectorIndex } from "../../packages/service/src/vector-stores/pgvector-index.ts";
import {
  AUTO_CHUNKING,
  type IngestionRow,
  type VectorStoreStore,
} from "../../packages/service/src/vector-stores/store.ts";
import type { Report } from "./report.ts";

const FILES = Number(process.env.BENCH_INGEST_FILES ?? 200);
const FILE_BYTES = 20_000;
const DIMENSIONS = 256;
const MODEL = "text-embedding-3-small";
/** `VECTOR_STORE_INGEST_CONCURRENCY`'s default. */
const CONCURRENCY = 2;

/** mulberry32: the same files every run. */
function seeded(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
}

/** The paragraphs of this repository's documentation (docs/*.md), English Markdown the files are made of. */
async function paragraphs(): Promise<string[]> {
  const dir = join(REPO_ROOT, "docs");
  const names = (await readdir(dir)).filter((n) => n.endsWith(".md")).sort();
  const texts = await Promise.all(names.map((n) => readFile(join(dir, n), "utf8")));
  return texts.flatMap((t) => t.split(/\n{2,}/)).filter((p) => p.trim() !== "");
}

/** A Markdown document of about FILE_BYTES: the documentation's paragraphs drawn at random. */
function markdown(random: () => number, source: string[], n: number): string {
  const parts = [`# Document ${n}`];
  let bytes = 0;
  while (bytes < FILE_BYTES) {
    const paragraph = source[Math.floor(random() * source.length)]!;
    parts.push(paragraph);
    bytes += paragraph.length + 2;
  }
  return parts.join("\n\n");
}

interface Timings {
  embedMs: number;
  indexMs: number;
  chunks: number;
}

/** The vector index, its calls timed. */
class TimedIndex extends PgVectorIndex {
  timings: Timings = { embedMs: 0, indexMs: 0, chunks: 0 };

  private async timed<T>(call: () => Promise<T>): Promise<T> {
    const started = performance.now();
    try {
      return await call();
    } finally {
      this.timings.indexMs += performance.now() - started;
    }
  }

  override stage(...args: Parameters<PgVectorIndex["stage"]>) {
    this.timings.chunks += args[2].length;
    return this.timed(() => super.stage(...args));
  }

  override publish(...args: Parameters<PgVectorIndex["publish"]>) {
    return this.timed(() => super.publish(...args));
  }

  override discardStaged(...args: Parameters<PgVectorIndex["discardStaged"]>) {
    return this.timed(() => super.discardStaged(...args));
  }
}

export async function benchIngestion(md: Report): Promise<void> {
  const random = seeded(21);
  const org = "bench";
  const source = await paragraphs();
  const documents = Array.from({ length: FILES }, (_, i) => ({
    id: `file_${i.toString(16).padStart(32, "0")}`,
    filename: `doc-${i}.md`,
    bytes: Buffer.from(markdown(random, source, i), "utf8"),
  }));
  const byId = new Map(documents.map((d) => [d.id, d]));
  const totalBytes = documents.reduce((sum, d) => sum + d.bytes.length, 0);

  // What ingestFile reads besides the index, in memory.
  const files = {
    async get(_org: string, id: string) {
      const d = byId.get(id);
      return d && { id, filename: d.filename, bytes: d.bytes.length, contentType: "text/markdown" };
    },
    async *content(file: { id: string }) {
      yield byId.get(file.id)!.bytes;
    },
  } as unknown as Files;
  const attachedBy = { user: "u", keyId: "key_bench" };
  const store = {
    async beginAttempt(_ref: unknown, generation: string): Promise<IngestionRow> {
      return {
        status: "in_progress",
        generation,
        attempts: 1,
        attributes: {},
        chunking: AUTO_CHUNKING,
        attachedBy,
      };
    },
    stillIngesting: async () => true,
    stillIngestingAny: async () => false,
    attributesOf: async () => ({}),
    finish: async () => true,
  } as unknown as VectorStoreStore;
  const principal = {
    org,
    user: attachedBy.user,
    keyId: attachedBy.keyId,
    permissions: ["vector_stores:write", "responses:write"],
    credential: "api_key",
  } as unknown as Principal;
  const keys: CreatorKeys = {
    callerOf: async () => ({ principal, admission: undefined, requestsCounted: false }),
  };

  const database = await startVectorDatabaseProcess({ port: 0, env: process.env, inMemory: true });
  try {
    await migrateVectorDatabase(database.databaseUrl);
    const index = new TimedIndex({ url: database.databaseUrl, statementTimeoutMs: 600_000 });
    await index.prepare();
    const embedder: Embedder = {
      async embed({ texts }) {
        const started = performance.now();
        const vectors = texts.map((t) => hashedEmbedding(t, DIMENSIONS));
        index.timings.embedMs += performance.now() - started;
        return { vectors, tokens: 0 };
      },
    };
    const deps = {
      store,
      index,
      files,
      embedder,
      keys,
      embeddingModel: MODEL,
      logger: createLogger("bench", "silent"),
    };
    const signal = new AbortController().signal;
    /** Ingests every file into the store `vectorStoreId`, `concurrency` at a time; wall milliseconds. */
    const ingestAll = async (vectorStoreId: string, concurrency: number) => {
      index.timings = { embedMs: 0, indexMs: 0, chunks: 0 };
      let next = 0;
      const started = performance.now();
      await Promise.all(
        Array.from({ length: concurrency }, async () => {
          while (next < documents.length) {
            const d = documents[next++]!;
            const outcome = await ingestFile(
              deps,
              {
                data: { org, vectorStoreId, fileId: d.id, generation: `ing_${vectorStoreId}_${d.id}` },
                attemptsMade: 0,
                opts: { attempts: 3 },
              },
              signal,
            );
            if (outcome !== "completed") throw new Error(`ingestion of ${d.filename}: ${outcome}`);
          }
        }),
      );
      return { wallMs: performance.now() - started, ...index.timings };
    };

    // Warm-up: a store of its own, so the width's partition and its HNSW index exist and the code is compiled.
    await ingestAll(`vs_${"f".repeat(32)}`, 1);
    console.log("  ingestion: warmed up; one file at a time");
    const one = await ingestAll(`vs_${"1".repeat(32)}`, 1);
    console.log(`  ingestion: ${CONCURRENCY} files at a time`);
    const many = await ingestAll(`vs_${"2".repeat(32)}`, CONCURRENCY);

    // The same extract and chunk calls alone, as a check of the remainder above.
    let extractMs = 0;
    let extractChunks = 0;
    for (const d of documents) {
      const started = performance.now();
      const text = await extractText(d.bytes, d.filename, "text/markdown");
      extractChunks += (await chunkText(text, AUTO_CHUNKING, MODEL)).length;
      extractMs += performance.now() - started;
    }
    await index.close();

    const rate = (chunks: number, ms: number) => (chunks / (ms / 1000)).toFixed(0);
    const withoutEmbed = (r: typeof one) => r.wallMs - r.embedMs;
    const rest = one.wallMs - one.embedMs - one.indexMs;
    md.section(
      `Vector-store ingestion: ${one.chunks.toLocaleString("en")} chunks of ${FILES} files, provider's time excluded`,
      `${FILES} Markdown files of this repository's documentation's paragraphs drawn at random (${(totalBytes / FILES / 1000).toFixed(1)} KB each on average, ${(totalBytes / 1e6).toFixed(1)} MB in all) through the ingestion worker's \`ingestFile\`: text extraction, chunking at 800 tokens with 400 of overlap (\`auto\`, cl100k_base for ${MODEL}), embedding ${64} chunks a call, staging each batch and publishing each file into the vector index on the local vector database (PGlite's build of pgvector in its own process, as \`pnpm start\` runs it; the store's partition with its HNSW index, so every chunk is inserted into the graph as it comes). The embedder answers at once with hashed vectors of ${DIMENSIONS} dimensions; its time is measured and subtracted. The file bytes, the store's rows and the key are in memory (their PostgreSQL and Redis round trips are not in these figures). After a warm-up ingestion of every file into another store.`,
    );
    md.table(
      ["one file at a time", "ms", "chunks/s"],
      [
        ["overall, embedding excluded", withoutEmbed(one).toFixed(0), rate(one.chunks, withoutEmbed(one))],
        ["extract + chunk (and the worker's own steps: the rest)", rest.toFixed(0), rate(one.chunks, rest)],
        ["embed (hashed vectors; excluded)", one.embedMs.toFixed(0), rate(one.chunks, one.embedMs)],
        ["stage + publish (the vector index)", one.indexMs.toFixed(0), rate(one.chunks, one.indexMs)],
      ],
    );
    md.line(
      `- ${one.chunks} chunks, ${FILES} files (${(one.chunks / FILES).toFixed(1)} chunks a file); wall time ${one.wallMs.toFixed(0)} ms, ${rate(one.chunks, one.wallMs)} chunks/s with the embedding`,
    );
    md.line(
      `- extract + chunk alone (the same \`extractText\` and \`chunkText\`, outside the worker): ${extractMs.toFixed(0)} ms, ${rate(extractChunks, extractMs)} chunks/s`,
    );
    md.line(
      `- ${CONCURRENCY} files at a time (\`VECTOR_STORE_INGEST_CONCURRENCY\`'s default), embedding excluded: ${rate(many.chunks, withoutEmbed(many))} chunks/s (${withoutEmbed(many).toFixed(0)} ms, ${many.chunks} chunks)`,
    );
  } finally {
    await database.stop();
  }
}

if (import.meta.main) {
  const { Report } = await import("./report.ts");
  await benchIngestion(new Report());
}
