import { randomBytes } from "node:crypto";
import { useTestVectorDatabase } from "@gw/test-kit";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { AttributeFilter, Attributes } from "../src/vector-stores/attribute-filter.ts";
import { PgVectorIndex } from "../src/vector-stores/pgvector-index.ts";
import {
  type ChunkInput,
  type FileInStore,
  type SearchHit,
  StagedChunksMismatch,
} from "../src/vector-stores/vector-index.ts";
import { seededRandom } from "./openapi-fuzz.ts";

const WIDTH = 16;
const newId = (prefix: string) => `${prefix}_${randomBytes(5).toString("hex")}`;

/** A unit vector of `width` numbers drawn from `random`. */
function randomUnit(random: () => number, width = WIDTH): number[] {
  const v = Array.from({ length: width }, () => random() * 2 - 1);
  const norm = Math.hypot(...v);
  return v.map((x) => x / norm);
}

/** Cosine similarity, as the index scores chunks (it keeps 32-bit floats: compare with a tolerance). */
function cosine(a: readonly number[], b: readonly number[]): number {
  let dot = 0;
  let na = 0;
  let nb = 0;
  for (let i = 0; i < a.length; i++) {
    dot += a[i]! * b[i]!;
    na += a[i]! * a[i]!;
    nb += b[i]! * b[i]!;
  }
  return dot / Math.sqrt(na * nb);
}

interface StoredChunk {
  fileId: string;
  index: number;
  embedding: number[];
}

const chunksOf = (embeddings: number[][], text = (i: number) => `chunk ${i}`): ChunkInput[] =>
  embeddings.map((embedding, index) => ({ index, text: text(index), tokenCount: 3 + index, embedding }));

/** The nearest `k` of `chunks` to `query`, by exact cosine similarity: what a search must answer. */
function bruteForce(chunks: readonly StoredChunk[], query: number[], k: number): StoredChunk[] {
  return [...chunks].sort((a, b) => cosine(b.embedding, query) - cosine(a.embedding, query)).slice(0, k);
}

const keyOf = (hit: Pick<SearchHit, "fileId" | "chunkIndex">) => `${hit.fileId}#${hit.chunkIndex}`;

/**
 * What every search promises: `k` hits (when that many readable ones exist), each of a readable file,
 * closest first, each scored with its cosine similarity to the query.
 */
function expectPromise(hits: SearchHit[], expected: { k: number; readable: ReadonlySet<string>; chunks: readonly StoredChunk[]; query: number[] }) {
  expect(hits).toHaveLength(expected.k);
  for (const hit of hits) expect(expected.readable.has(hit.fileId)).toBe(true);
  const byKey = new Map(expected.chunks.map((c) => [`${c.fileId}#${c.index}`, c]));
  for (const hit of hits) expect(hit.score).toBeCloseTo(cosine(byKey.get(keyOf(hit))!.embedding, expected.query), 4);
  for (let i = 1; i < hits.length; i++) expect(hits[i]!.score).toBeLessThanOrEqual(hits[i - 1]!.score + 1e-6);
  expect(new Set(hits.map(keyOf)).size).toBe(hits.length);
}

describe("the pgvector index", () => {
  const database = useTestVectorDatabase();
  /** Every search answered exactly (few candidates), and every search through the HNSW index. */
  let exact: PgVectorIndex;
  let indexed: PgVectorIndex;
  beforeAll(() => {
    exact = new PgVectorIndex({ url: database.url, maxConnections: 1, exactSearchMaxRows: 1_000_000 });
    indexed = new PgVectorIndex({ url: database.url, maxConnections: 1, exactSearchMaxRows: 0 });
  });
  afterAll(async () => {
    await exact?.close();
    await indexed?.close();
  });
  const both = () =>
    [
      ["answered exactly", () => exact],
      ["through the HNSW index", () => indexed],
    ] as const;

  describe("a store of 1,000 files of 5 chunks each", () => {
    const org = newId("org");
    const store = newId("vs");
    const random = seededRandom(40);
    const files = Array.from({ length: 1_000 }, (_, i) => `file-${String(i).padStart(4, "0")}`);
    const chunks: StoredChunk[] = [];
    const query = randomUnit(random);
    beforeAll(async () => {
      for (const fileId of files) {
        const embeddings = Array.from({ length: 5 }, () => randomUnit(random));
        embeddings.forEach((embedding, index) => chunks.push({ fileId, index, embedding }));
        await exact.replaceFile({ org, vectorStoreId: store, fileId }, chunksOf(embeddings), { n: Number(fileId.slice(5)) });
      }
    }, 300_000);

    /** The files whose chunks lie farthest from the query, `count` of them: readable ones that must still be found. */
    const farthestFiles = (count: number) => {
      const best = new Map<string, number>();
      for (const c of chunks) best.set(c.fileId, Math.max(best.get(c.fileId) ?? -2, cosine(c.embedding, query)));
      return [...best.entries()].sort((a, b) => a[1] - b[1]).slice(0, count).map(([f]) => f);
    };

    for (const [share, count] of [
      ["10 %", 100],
      ["0.1 %", 1],
    ] as const) {
      for (const [how, index] of both())
        it(`returns the k nearest readable chunks when the caller may read ${share} of the files, far from the query, ${how}`, async () => {
          const readable = new Set(farthestFiles(count));
          const k = 5;
          const hits = await index().search({
            org,
            vectorStoreIds: [store],
            embedding: query,
            limit: k,
            readable: { kind: "files", fileIds: [...readable] },
          });
          const allowed = chunks.filter((c) => readable.has(c.fileId));
          expectPromise(hits, { k, readable, chunks, query });
          if (index() === exact) expect(hits.map(keyOf)).toEqual(bruteForce(allowed, query, k).map((c) => `${c.fileId}#${c.index}`));
        });
    }
  });
});
