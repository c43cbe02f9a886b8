/**
 * Vector search with the permission filter (`BENCH_ONLY=vectors`): the vector
 * index (packages/service/src/vector-stores/pgvector-index.ts) on the local
 * vector database (PGlite's build of pgvector, in its own process, over
 * PostgreSQL's wire protocol, as `pnpm start` runs it), over
 * `BENCH_VECTOR_CHUNKS` chunks (default 100,000) in `BENCH_VECTOR_FILES`
 * files (default 1,000) of one store, of which the caller may read a tenth.
 * p50 and p99 of a search of 10 results, one at a time: with the readable
 * files given (as a LookupResources would list them), and with each page's
 * files decided in one call (as a bulk check would; the check's own round
 * trip is not in it), beside the search without a filter. Nothing is asserted.
 */
import { cpus } from "node:os";
import { createPostgres, migrateVectorDatabase } from "@gw/core/postgres";
import { startVectorDatabaseProcess } from "@gw/devstack";
import { PgVectorIndex } from "../../packages/service/src/vector-stores/pgvector-index.ts";
import type { ReadableFiles, SearchRequest } from "../../packages/service/src/vector-stores/vector-index.ts";
import type { Report } from "./report.ts";

const CHUNKS = Number(process.env.BENCH_VECTOR_CHUNKS ?? 100_000);
const FILES = Number(process.env.BENCH_VECTOR_FILES ?? 1_000);
const DIMENSIONS = Number(process.env.BENCH_VECTOR_DIMENSIONS ?? 256);
const SEARCHES = Number(process.env.BENCH_VECTOR_SEARCHES ?? 200);
const READABLE_SHARE = 0.1;
const LIMIT = 10;

/** mulberry32: the same data every run. */
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

const unit = (v: number[]) => {
  const norm = Math.hypot(...v);
  return v.map((x) => x / norm);
};

const quantile = (sorted: number[], q: number) =>
  sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;

export async function benchVectorSearch(md: Report): Promise<void> {
  const random = seeded(20);
  const gaussian = () => Math.sqrt(-2 * Math.log(1 - random())) * Math.cos(2 * Math.PI * random());
  // Files are about topics, their chunks near their file's: each file a centre, each chunk that plus noise.
  const topics = Array.from({ length: 50 }, () => unit(Array.from({ length: DIMENSIONS }, gaussian)));
  const near = (centre: number[], spread: number) => unit(centre.map((x) => x + spread * gaussian()));
  const files = Array.from({ length: FILES }, (_, i) => `file_${i.toString(16).padStart(32, "0")}`);
  const centres = files.map(() => near(topics[Math.floor(random() * topics.length)]!, 0.06));
  const readable = files.filter(() => random() < READABLE_SHARE);
  const readableSet = new Set(readable);
  const queries = Array.from({ length: SEARCHES }, () =>
    near(topics[Math.floor(random() * topics.length)]!, 0.08),
  );

  const database = await startVectorDatabaseProcess({ port: 0, env: process.env, inMemory: true });
  try {
    await migrateVectorDatabase(database.databaseUrl);
    const index = new PgVectorIndex({ url: database.databaseUrl, statementTimeoutMs: 600_000 });
    const exact = new PgVectorIndex({
      url: database.databaseUrl,
      exactSearchMaxRows: Number.MAX_SAFE_INTEGER,
      statementTimeoutMs: 600_000,
    });
    const org = "bench";
    const vectorStoreId = `vs_${"0".repeat(32)}`;
    const perFile = Math.ceil(CHUNKS / FILES);
    // The width's partition made here without its HNSW index, which is built once the chunks are in (as an
    // operator would build it for a store loaded at once): inserting each chunk into the graph as it comes
    // takes PGlite's WebAssembly about half an hour for 100,000 on this machine.
    await index.prepare();
    const admin = createPostgres(database.databaseUrl, {
      connectionName: "bench",
      maxConnections: 1,
      statementTimeoutMs: 3_600_000,
    });
    const partition = `vector_chunks_${DIMENSIONS}`;
    await admin.query(`CREATE TABLE ${partition} PARTITION OF vector_chunks FOR VALUES IN (${DIMENSIONS})`);
    const loadStarted = performance.now();
    let written = 0;
    for (let f = 0; f < FILES; f += 4) {
      await Promise.all(
        files.slice(f, f + 4).map((fileId, j) => {
          const chunks = Array.from(
            { length: Math.min(perFile, CHUNKS - (f + j) * perFile) },
            (_, index) => ({
              index,
              text: `chunk ${index} of ${fileId}`,
              tokenCount: 800,
              embedding: near(centres[f + j]!, 0.04),
            }),
          );
          written += chunks.length;
          // As an ingestion writes a file: staged a batch of embeddings at a time, then published whole.
          const file = { org, vectorStoreId, fileId };
          return (async () => {
            for (let c = 0; c < chunks.length; c += 10) await index.stage(file, "bench", chunks.slice(c, c + 10));
            await index.publish(file, "bench", chunks.length, { n: f + j });
          })();
        }),
      );
      if ((f + 4) % 100 === 0) console.log(`  vector search: ${written} chunks written`);
    }
    const loadSeconds = (performance.now() - loadStarted) / 1000;
    console.log(
      `  vector search: ${written} chunks written in ${loadSeconds.toFixed(0)} s; building the HNSW index`,
    );
    const buildStarted = performance.now();
    // The index `ensureWidth` would have made (packages/service/src/vector-stores/pgvector-index.ts).
    await admin.transaction(async (tx) => {
      await tx.query("SET LOCAL maintenance_work_mem = '1GB'");
      await tx.query(
        `CREATE INDEX ${partition}_embedding ON ${partition} USING hnsw ((embedding::vector(${DIMENSIONS})) vector_cosine_ops)`,
      );
    });
    await admin.query(`ANALYZE ${partition}`);
    await admin.close();
    const buildSeconds = (performance.now() - buildStarted) / 1000;
    console.log(`  vector search: HNSW index built in ${buildSeconds.toFixed(0)} s; searching`);

    const request = (query: number[], readableFiles: ReadableFiles): SearchRequest => ({
      org,
      vectorStoreIds: [vectorStoreId],
      embedding: query,
      limit: LIMIT,
      readable: readableFiles,
    });
    let decideCalls = 0;
    let decidedFiles = 0;
    const decide: ReadableFiles = {
      kind: "decide",
      async decide(fileIds) {
        decideCalls++;
        decidedFiles += fileIds.length;
        return new Set(fileIds.filter((f) => readableSet.has(f)));
      },
    };
    const rows: [string, ReadableFiles][] = [
      ["every file readable (no permission filter)", { kind: "files", fileIds: files }],
      ["10 % readable, the readable files given (a lookup's list)", { kind: "files", fileIds: readable }],
      ["10 % readable, each page's files decided in one call (a bulk check)", decide],
    ];
    // Warm: PGlite reads the index into its buffers once.
    for (const query of queries.slice(0, 10)) for (const [, r] of rows) await index.search(request(query, r));
    const latencies = rows.map(() => [] as number[]);
    const short = rows.map(() => 0);
    decideCalls = 0;
    decidedFiles = 0;
    // Alternating, one search at a time, so the machine's load falls on every row alike.
    for (const query of queries)
      for (const [i, [, r]] of rows.entries()) {
        const started = performance.now();
        const hits = await index.search(request(query, r));
        latencies[i]!.push(performance.now() - started);
        if (hits.length < LIMIT) short[i]!++;
      }
    // Recall of the indexed search against every distance computed, with the filter.
    let found = 0;
    for (const query of queries.slice(0, 20)) {
      const truth = new Set(
        (await exact.search(request(query, rows[1]![1]))).map((h) => `${h.fileId}#${h.chunkIndex}`),
      );
      for (const hit of await index.search(request(query, rows[1]![1])))
        if (truth.has(`${hit.fileId}#${hit.chunkIndex}`)) found++;
    }
    await Promise.all([index.close(), exact.close()]);

    md.section(
      `Vector search with the permission filter: ${written.toLocaleString("en")} chunks in ${FILES.toLocaleString("en")} files`,
      `The vector index on the local vector database (PGlite 0.3.15's build of pgvector 0.8.0, WebAssembly in a process of its own, over PostgreSQL's wire protocol with \`pg\`: as \`pnpm start\` and the tests run it; production runs the same SQL on PostgreSQL with pgvector). One store of ${written.toLocaleString("en")} chunks of ${DIMENSIONS} dimensions in ${FILES.toLocaleString("en")} files (chunks near their file's topic, files about 50 topics), an HNSW index (cosine, pgvector's defaults m=16, ef_construction=64); the caller may read ${readable.length} files (${(100 * READABLE_SHARE).toFixed(0)} %, drawn at random). ${SEARCHES} searches of ${LIMIT} results, one at a time, the rows alternating. The filter is in the nearest-neighbour search (pgvector's iterative index scan, relaxed order), so every search of the filtered rows returned its ${LIMIT} readable chunks (searches short of ${LIMIT}: ${short.join(", ")}). The decided row pages through candidates and asks about each page's new files in one call: ${(decideCalls / SEARCHES).toFixed(1)} calls and ${(decidedFiles / SEARCHES).toFixed(0)} files a search; the check's own round trip (one SpiceDB bulk check a call) is not in its figure. Goal: p50 under 30 ms with the filter.`,
    );
    md.table(
      ["search (10 results)", "p50 ms", "p99 ms"],
      rows.map(([name], i) => {
        const sorted = [...latencies[i]!].sort((a, b) => a - b);
        return [name, quantile(sorted, 0.5).toFixed(2), quantile(sorted, 0.99).toFixed(2)];
      }),
    );
    md.line(
      `- recall@${LIMIT} of the filtered search through the HNSW index against every distance computed: ${(found / (20 * LIMIT)).toFixed(3)} (20 queries)`,
    );
    md.line(
      `- writing the chunks (\`stage\` 10 at a time, then \`publish\`, 4 files at a time, before the HNSW index): ${(written / loadSeconds).toFixed(0)} chunks a second (${loadSeconds.toFixed(0)} s); building the HNSW index over them: ${buildSeconds.toFixed(0)} s (${cpus().length} cores)`,
    );
  } finally {
    await database.stop();
  }
}

if (import.meta.main) {
  const { Report } = await import("./report.ts");
  await benchVectorSearch(new Report());
}
