/**
 * The vector index on the real engine: pgvector's own code (PGlite's build,
 * the local vector database) over PostgreSQL's wire protocol, as in
 * production. Every block keeps to organizations of its own: the worker's
 * vector database is shared by its files.
 */
import { randomBytes } from "node:crypto";
import { ERROR_CATALOGUE, errorBody } from "@gw/core/errors";
import { useTestVectorDatabase } from "@gw/test-kit";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { seededRandom } from "../../test/openapi-fuzz.ts";
import {
  type AttributeFilter,
  type Attributes,
  checkAttributeFilter,
  InvalidAttributeFilter,
} from "./attribute-filter.ts";
import { PgVectorIndex } from "./pgvector-index.ts";
import {
  type ChunkInput,
  type FileInStore,
  type ReadableFiles,
  type SearchHit,
  StagedChunksMismatch,
} from "./vector-index.ts";

const WIDTH = 16;
const newId = (prefix: string) => `${prefix}_${randomBytes(8).toString("hex")}`;

/** A unit vector of `width` numbers drawn from `random`. */
function randomUnit(random: () => number, width = WIDTH): number[] {
  const v = Array.from({ length: width }, () => random() * 2 - 1);
  const norm = Math.hypot(...v);
  return v.map((x) => x / norm);
}

/** A unit vector along axis `axis` (with a little of the next one, so no two are the same). */
const axis = (i: number, width = WIDTH, tilt = 0) =>
  Array.from({ length: width }, (_, j) => (j === i % width ? 1 : j === (i + 1) % width ? tilt : 0));

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

/** The nearest `k` of `chunks` to `query`, by exact cosine similarity: what an exact search must answer. */
function bruteForce(chunks: readonly StoredChunk[], query: number[], k: number): StoredChunk[] {
  return [...chunks].sort((a, b) => cosine(b.embedding, query) - cosine(a.embedding, query)).slice(0, k);
}

const keyOf = (hit: Pick<SearchHit, "fileId" | "chunkIndex">) => `${hit.fileId}#${hit.chunkIndex}`;
const storedKey = (c: StoredChunk) => `${c.fileId}#${c.index}`;
const allOf = (fileIds: Iterable<string>): ReadableFiles => ({ kind: "files", fileIds: [...fileIds] });

/**
 * What every search promises: `k` hits, each of a readable file, closest first, each scored with its
 * cosine similarity to the query, none twice.
 */
function expectPromise(
  hits: SearchHit[],
  expected: { k: number; readable: ReadonlySet<string>; chunks: readonly StoredChunk[]; query: number[] },
) {
  expect(hits).toHaveLength(expected.k);
  for (const hit of hits) expect(expected.readable.has(hit.fileId)).toBe(true);
  const byKey = new Map(expected.chunks.map((c) => [storedKey(c), c]));
  for (const hit of hits)
    expect(hit.score).toBeCloseTo(cosine(byKey.get(keyOf(hit))!.embedding, expected.query), 4);
  for (let i = 1; i < hits.length; i++) expect(hits[i]!.score).toBeLessThanOrEqual(hits[i - 1]!.score + 1e-6);
  expect(new Set(hits.map(keyOf)).size).toBe(hits.length);
}

/** A `decide` callback answering from `readable`, recording each call's files. */
function decider(readable: ReadonlySet<string>) {
  const calls: string[][] = [];
  const readableFiles: ReadableFiles = {
    kind: "decide",
    async decide(fileIds) {
      calls.push([...fileIds]);
      return new Set(fileIds.filter((f) => readable.has(f)));
    },
  };
  return { calls, readable: readableFiles };
}

describe("the pgvector index", () => {
  const database = useTestVectorDatabase();
  /** Every search answered exactly (few candidates); every search through the HNSW index; the HNSW index giving up early. */
  let exact: PgVectorIndex;
  let indexed: PgVectorIndex;
  let impatient: PgVectorIndex;
  let sql: pg.Client;
  beforeAll(async () => {
    exact = new PgVectorIndex({ url: database.url, exactSearchMaxRows: 1_000_000 });
    indexed = new PgVectorIndex({ url: database.url, exactSearchMaxRows: 0 });
    impatient = new PgVectorIndex({ url: database.url, exactSearchMaxRows: 0, maxScanTuples: 20 });
    sql = new pg.Client({ connectionString: database.url });
    await sql.connect();
  });
  afterAll(async () => {
    await Promise.all([exact?.close(), indexed?.close(), impatient?.close(), sql?.end()]);
  });
  const indexes = () =>
    [
      ["answered exactly", () => exact],
      ["through the HNSW index", () => indexed],
      ["through the HNSW index, falling back to every distance when its scan gives up", () => impatient],
    ] as const;

  /** Writes each file's chunks, several files at a time. */
  async function load(files: { file: FileInStore; chunks: ChunkInput[]; attributes?: Attributes }[]) {
    for (let i = 0; i < files.length; i += 10)
      await Promise.all(
        files
          .slice(i, i + 10)
          .map(({ file, chunks, attributes }) => exact.replaceFile(file, chunks, attributes ?? {})),
      );
  }

  describe("a store of 400 files of 5 chunks each, most of which the caller may not read", () => {
    const org = newId("org");
    const store = newId("vs");
    const random = seededRandom(40);
    const files = Array.from({ length: 400 }, (_, i) => `file_${String(i).padStart(4, "0")}`);
    const chunks: StoredChunk[] = [];
    const query = randomUnit(random);
    beforeAll(async () => {
      const loading = files.map((fileId) => {
        const embeddings = Array.from({ length: 5 }, () => randomUnit(random));
        for (const [index, embedding] of embeddings.entries()) chunks.push({ fileId, index, embedding });
        return { file: { org, vectorStoreId: store, fileId }, chunks: chunksOf(embeddings) };
      });
      await load(loading);
    }, 120_000);

    /** The files whose chunks lie farthest from the query, `count` of them: every nearer chunk is of a file the caller may not read. */
    const farthestFiles = (count: number) => {
      const best = new Map<string, number>();
      for (const c of chunks)
        best.set(c.fileId, Math.max(best.get(c.fileId) ?? -2, cosine(c.embedding, query)));
      return new Set(
        [...best.entries()]
          .sort((a, b) => a[1] - b[1])
          .slice(0, count)
          .map(([f]) => f),
      );
    };

    for (const [share, count] of [
      ["10 %", 40],
      ["1 %", 4],
    ] as const)
      for (const mode of ["files", "decide"] as const)
        for (const [how, index] of indexes())
          it(`returns the 10 nearest readable chunks when the caller may read ${share} of the files, the farthest ones (${mode}), ${how}`, async () => {
            const readable = farthestFiles(count);
            const decided = decider(readable);
            const k = 10;
            const hits = await index().search({
              org,
              vectorStoreIds: [store],
              embedding: query,
              limit: k,
              readable: mode === "files" ? allOf(readable) : decided.readable,
            });
            expectPromise(hits, { k, readable, chunks, query });
            const allowed = chunks.filter((c) => readable.has(c.fileId));
            if (index() === exact)
              expect(hits.map(keyOf)).toEqual(bruteForce(allowed, query, k).map(storedKey));
          });

    it("decides the candidates' files in bulk, a page at a time, each file once, and only files it met", async () => {
      const readable = farthestFiles(40);
      const decided = decider(readable);
      const hits = await exact.search({
        org,
        vectorStoreIds: [store],
        embedding: query,
        limit: 10,
        readable: decided.readable,
      });
      expect(hits).toHaveLength(10);
      const asked = decided.calls.flat();
      expect(new Set(asked).size).toBe(asked.length);
      // The 360 unreadable files stand nearest: deciding them one or a few at a time would take hundreds of calls.
      expect(decided.calls.length).toBeGreaterThan(1);
      expect(decided.calls.length).toBeLessThanOrEqual(6);
      for (const fileId of asked) expect(files).toContain(fileId);
      // The first page is the nearest chunks: its files are the ones nearest the query.
      const nearestFiles = new Set(bruteForce(chunks, query, 40).map((c) => c.fileId));
      expect(new Set(decided.calls[0])).toEqual(nearestFiles);
    });

    it("returns every readable chunk when fewer than asked for exist, asking about every file once", async () => {
      const readable = farthestFiles(1);
      for (const mode of ["files", "decide"] as const) {
        const decided = decider(readable);
        const hits = await exact.search({
          org,
          vectorStoreIds: [store],
          embedding: query,
          limit: 20,
          readable: mode === "files" ? allOf(readable) : decided.readable,
        });
        expectPromise(hits, { k: 5, readable, chunks, query });
        if (mode === "decide") expect(decided.calls.flat().sort()).toEqual([...files].sort());
      }
    });

    it("returns nothing when the caller may read nothing, whatever the mode", async () => {
      for (const [, index] of indexes()) {
        const none = await index().search({
          org,
          vectorStoreIds: [store],
          embedding: query,
          limit: 5,
          readable: allOf([]),
        });
        expect(none).toEqual([]);
        const decided = decider(new Set());
        expect(
          await index().search({
            org,
            vectorStoreIds: [store],
            embedding: query,
            limit: 5,
            readable: decided.readable,
          }),
        ).toEqual([]);
      }
    });

    it("leaves out chunks scoring below the minimum, and asks about no file whose chunks all do", async () => {
      const everyFile = new Set(files);
      const minScore = 0.5;
      const above = chunks.filter((c) => cosine(c.embedding, query) >= minScore + 1e-4);
      expect(above.length).toBeGreaterThan(0);
      expect(above.length).toBeLessThan(50);
      for (const [, index] of indexes()) {
        const decided = decider(everyFile);
        const hits = await index().search({
          org,
          vectorStoreIds: [store],
          embedding: query,
          limit: 50,
          readable: decided.readable,
          minScore,
        });
        for (const hit of hits) expect(hit.score).toBeGreaterThanOrEqual(minScore);
        if (index() === exact) expect(new Set(hits.map(keyOf))).toEqual(new Set(above.map(storedKey)));
        const reachable = new Set(
          chunks.filter((c) => cosine(c.embedding, query) >= minScore - 1e-4).map((c) => c.fileId),
        );
        for (const fileId of decided.calls.flat()) expect(reachable.has(fileId)).toBe(true);
      }
    });

    it("validates what it is asked", async () => {
      const base = { org, vectorStoreIds: [store], embedding: query, readable: allOf(files) };
      await expect(exact.search({ ...base, limit: 0 })).rejects.toThrow(RangeError);
      await expect(exact.search({ ...base, limit: 1_001 })).rejects.toThrow(RangeError);
      await expect(exact.search({ ...base, limit: 1, embedding: new Array(WIDTH).fill(0) })).rejects.toThrow(
        /all zeros/,
      );
      await expect(exact.search({ ...base, limit: 1, embedding: [1, Number.NaN] })).rejects.toThrow(
        RangeError,
      );
      await expect(exact.search({ ...base, limit: 1, embedding: new Array(2_001).fill(1) })).rejects.toThrow(
        RangeError,
      );
      await expect(exact.search({ ...base, limit: 1, minScore: Number.NaN })).rejects.toThrow(RangeError);
      // A query of a width no chunk has meets nothing.
      expect(await exact.search({ ...base, limit: 1, embedding: axis(0, 7) })).toEqual([]);
    });
  });

  describe("attribute filters", () => {
    const org = newId("org");
    const store = newId("vs");
    const query = axis(0);
    const attributesOf: Record<string, Attributes> = {
      f_a: { author: "alice", year: 2020, draft: true, rank: 1 },
      f_b: { author: "bob", year: 2021, draft: false, rank: 1.5 },
      f_c: { author: "carol", year: 2019, rank: "high" },
      f_d: { year: "2020" },
      f_e: {},
    };
    beforeAll(() =>
      load(
        Object.entries(attributesOf).map(([fileId, attributes], i) => ({
          file: { org, vectorStoreId: store, fileId },
          chunks: chunksOf([axis(0, WIDTH, 0.1 * (i + 1)), axis(0, WIDTH, -0.1 * (i + 1))]),
          attributes,
        })),
      ),
    );

    const search = (filter: AttributeFilter, index = exact) =>
      index.search({
        org,
        vectorStoreIds: [store],
        embedding: query,
        limit: 100,
        readable: allOf(Object.keys(attributesOf)),
        filter,
      });
    const filesFound = async (filter: AttributeFilter) =>
      [...new Set((await search(filter)).map((h) => h.fileId))].sort();

    const cases: [string, AttributeFilter, string[]][] = [
      ["eq on a string", { type: "eq", key: "author", value: "alice" }, ["f_a"]],
      [
        "eq on a number (1 equals 1.0; never the string)",
        { type: "eq", key: "year", value: 2020.0 },
        ["f_a"],
      ],
      ["eq on a string of digits (never the number)", { type: "eq", key: "year", value: "2020" }, ["f_d"]],
      ["eq on a boolean", { type: "eq", key: "draft", value: false }, ["f_b"]],
      [
        "ne (an absent attribute is not equal)",
        { type: "ne", key: "author", value: "alice" },
        ["f_b", "f_c", "f_d", "f_e"],
      ],
      [
        "gt on numbers (a string is of another type)",
        { type: "gt", key: "year", value: 2019 },
        ["f_a", "f_b"],
      ],
      ["gte on numbers", { type: "gte", key: "year", value: 2020 }, ["f_a", "f_b"]],
      ["lt on numbers", { type: "lt", key: "rank", value: 1.5 }, ["f_a"]],
      ["lte on numbers", { type: "lte", key: "rank", value: 1.5 }, ["f_a", "f_b"]],
      ["gt on strings", { type: "gt", key: "author", value: "b" }, ["f_b", "f_c"]],
      ["lte on strings (a number is of another type)", { type: "lte", key: "year", value: "2020" }, ["f_d"]],
      ["in", { type: "in", key: "author", value: ["alice", "carol", "dave"] }, ["f_a", "f_c"]],
      ["in with numbers", { type: "in", key: "year", value: [2019, 2021] }, ["f_b", "f_c"]],
      [
        "nin (an absent attribute is in no list)",
        { type: "nin", key: "author", value: ["alice", "bob"] },
        ["f_c", "f_d", "f_e"],
      ],
      [
        "and",
        {
          type: "and",
          filters: [
            { type: "gte", key: "year", value: 2019 },
            { type: "ne", key: "author", value: "bob" },
          ],
        },
        ["f_a", "f_c"],
      ],
      [
        "or",
        {
          type: "or",
          filters: [
            { type: "eq", key: "draft", value: true },
            { type: "eq", key: "year", value: "2020" },
          ],
        },
        ["f_a", "f_d"],
      ],
      [
        "nested compounds",
        {
          type: "or",
          filters: [
            {
              type: "and",
              filters: [
                { type: "eq", key: "author", value: "bob" },
                { type: "lt", key: "year", value: 2022 },
              ],
            },
            { type: "and", filters: [{ type: "eq", key: "rank", value: "high" }] },
          ],
        },
        ["f_b", "f_c"],
      ],
      ["and of nothing: every file", { type: "and", filters: [] }, ["f_a", "f_b", "f_c", "f_d", "f_e"]],
      ["or of nothing: no file", { type: "or", filters: [] }, []],
      ["a key no file has", { type: "eq", key: "missing", value: 1 }, []],
    ];
    for (const [name, filter, expected] of cases)
      it(`keeps the files a filter matches: ${name}`, async () => {
        expect(await filesFound(filter)).toEqual(expected);
      });

    it("filters through the HNSW index too", async () => {
      const hits = await search({ type: "in", key: "author", value: ["bob", "carol"] }, indexed);
      expect(hits.map((h) => h.fileId).sort()).toEqual(["f_b", "f_b", "f_c", "f_c"]);
    });

    it("keeps a key's quotes and operators as data", async () => {
      expect(await filesFound({ type: "eq", key: "author') OR true --", value: "x" })).toEqual([]);
      expect(await filesFound({ type: "eq", key: "author", value: "alice' OR '1'='1" })).toEqual([]);
    });

    it("filters by attributes set after the chunks were written", async () => {
      const fileId = "f_later";
      await exact.replaceFile({ org, vectorStoreId: store, fileId }, chunksOf([axis(0, WIDTH, 0.9)]), {
        tag: "old",
      });
      await exact.setAttributes({ org, vectorStoreId: store, fileId }, { tag: "new" });
      const found = (tag: string) =>
        exact.search({
          org,
          vectorStoreIds: [store],
          embedding: query,
          limit: 10,
          readable: allOf([fileId]),
          filter: { type: "eq", key: "tag", value: tag },
        });
      expect(await found("old")).toEqual([]);
      const [hit] = await found("new");
      expect(hit?.attributes).toEqual({ tag: "new" });
    });

    const invalid: [string, unknown][] = [
      ["an unknown type", { type: "like", key: "author", value: "a%" }],
      ["no key", { type: "eq", value: "a" }],
      ["an empty key", { type: "eq", key: "", value: "a" }],
      ["a key holding U+0000", { type: "eq", key: "a\u0000", value: "a" }],
      ["eq with a list", { type: "eq", key: "author", value: ["a"] }],
      ["eq with null", { type: "eq", key: "author", value: null }],
      ["eq with an object", { type: "eq", key: "author", value: { a: 1 } }],
      ["gt with a boolean", { type: "gt", key: "draft", value: true }],
      ["lt with infinity", { type: "lt", key: "year", value: Number.POSITIVE_INFINITY }],
      ["in with a single value", { type: "in", key: "author", value: "alice" }],
      ["nin with a boolean in its list", { type: "nin", key: "draft", value: [true] }],
      [
        "in with more than 1,000 values",
        { type: "in", key: "year", value: Array.from({ length: 1_001 }, (_, i) => i) },
      ],
      ["a compound without a list", { type: "and", filters: { type: "eq", key: "a", value: 1 } }],
      ["a filter that is no object", "author = alice"],
      ["a compound holding no object", { type: "or", filters: [null] }],
      [
        "compounds nested deeper than 8",
        Array.from({ length: 8 }).reduce<unknown>((inner) => ({ type: "and", filters: [inner] }), {
          type: "eq",
          key: "a",
          value: 1,
        }),
      ],
      [
        "more than 64 comparisons",
        {
          type: "or",
          filters: Array.from({ length: 65 }, (_, i) => ({ type: "eq", key: "year", value: i })),
        },
      ],
    ];
    for (const [name, filter] of invalid)
      it(`refuses a filter with a 422 at 'filters': ${name}`, async () => {
        expect(() => checkAttributeFilter(filter as AttributeFilter)).toThrow(InvalidAttributeFilter);
        const err = await search(filter as AttributeFilter).then(
          () => undefined,
          (e: unknown) => e,
        );
        expect(err).toBeInstanceOf(InvalidAttributeFilter);
        const refused = err as InvalidAttributeFilter;
        expect(ERROR_CATALOGUE[refused.code].status).toBe(422);
        expect(errorBody(refused, { openai: true })).toMatchObject({ error: { param: "filters" } });
      });

    it("takes the deepest and largest filters it allows", () => {
      const deepest = Array.from({ length: 7 }).reduce<AttributeFilter>(
        (inner) => ({ type: "and", filters: [inner] }),
        {
          type: "eq",
          key: "a",
          value: 1,
        },
      );
      expect(() => checkAttributeFilter(deepest)).not.toThrow();
      const widest: AttributeFilter = {
        type: "or",
        filters: Array.from({ length: 64 }, (_, i) => ({
          type: "in",
          key: "year",
          value: Array.from({ length: 1_000 }, (_, j) => i * j),
        })),
      };
      expect(() => checkAttributeFilter(widest)).not.toThrow();
    });
  });

  describe("writing files", () => {
    const org = newId("org");
    const store = newId("vs");
    const query = axis(3);
    const file = (fileId: string, vectorStoreId = store, inOrg = org): FileInStore => ({
      org: inOrg,
      vectorStoreId,
      fileId,
    });
    const texts = async (fileId: string, vectorStoreId = store, inOrg = org) =>
      (
        await exact.search({
          org: inOrg,
          vectorStoreIds: [vectorStoreId],
          embedding: query,
          limit: 100,
          readable: allOf([fileId]),
        })
      )
        .map((h) => h.text)
        .sort();
    const stagedRows = async (fileId: string) =>
      (
        await sql.query<{ n: number }>(
          "SELECT count(*)::int AS n FROM vector_chunks_staged WHERE org = $1 AND file_id = $2",
          [org, fileId],
        )
      ).rows[0]!.n;
    const version = (name: string, count: number) =>
      chunksOf(
        Array.from({ length: count }, (_, i) => axis(3, WIDTH, 0.01 * (i + 1))),
        (i) => `${name} ${i}`,
      );

    it("replaces a file's chunks whole", async () => {
      await exact.replaceFile(file("f_replace"), version("v1", 3), {});
      await exact.replaceFile(file("f_replace"), version("v2", 2), {});
      expect(await texts("f_replace")).toEqual(["v2 0", "v2 1"]);
      await exact.replaceFile(file("f_replace"), [], {});
      expect(await texts("f_replace")).toEqual([]);
    });

    it("keeps staged chunks out of every search until they are published, then replaces the file's whole", async () => {
      const f = file("f_staged");
      await exact.replaceFile(f, version("old", 2), { v: 1 });
      const chunks = version("new", 5);
      await exact.stage(f, "gen-1", chunks.slice(0, 3));
      await exact.stage(f, "gen-1", chunks.slice(3));
      for (const [, index] of indexes()) {
        const hits = await index().search({
          org,
          vectorStoreIds: [store],
          embedding: query,
          limit: 100,
          readable: allOf(["f_staged"]),
        });
        expect(hits.map((h) => h.text).sort()).toEqual(["old 0", "old 1"]);
      }
      await exact.publish(f, "gen-1", 5, { v: 2 });
      expect(await texts("f_staged")).toEqual(["new 0", "new 1", "new 2", "new 3", "new 4"]);
      const [hit] = await exact.search({
        org,
        vectorStoreIds: [store],
        embedding: query,
        limit: 1,
        readable: allOf(["f_staged"]),
      });
      expect(hit?.attributes).toEqual({ v: 2 });
      expect(await stagedRows("f_staged")).toBe(0);
    });

    it("refuses to publish other than the chunks it was told were staged, and changes nothing", async () => {
      const f = file("f_mismatch");
      await exact.replaceFile(f, version("old", 1), {});
      await exact.stage(f, "gen-1", version("new", 3));
      await expect(exact.publish(f, "gen-1", 4, {})).rejects.toThrow(StagedChunksMismatch);
      await expect(exact.publish(f, "gen-1", 2, {})).rejects.toThrow(StagedChunksMismatch);
      expect(await texts("f_mismatch")).toEqual(["old 0"]);
      expect(await stagedRows("f_mismatch")).toBe(3);
      // A generation that another ingestion's publish discarded, or that never was.
      await exact.stage(f, "gen-2", version("newer", 2));
      await exact.publish(f, "gen-2", 2, {});
      await expect(exact.publish(f, "gen-1", 3, {})).rejects.toThrow(StagedChunksMismatch);
      expect(await texts("f_mismatch")).toEqual(["newer 0", "newer 1"]);
      expect(await stagedRows("f_mismatch")).toBe(0);
    });

    it("discards staged chunks of one generation, of every generation, or older than a time", async () => {
      const f = file("f_discard");
      await exact.stage(f, "gen-1", version("a", 2));
      await exact.stage(f, "gen-2", version("b", 3));
      await exact.discardStaged(f, "gen-1");
      expect(await stagedRows("f_discard")).toBe(3);
      await exact.discardStaged(f);
      expect(await stagedRows("f_discard")).toBe(0);
      await exact.stage(f, "gen-3", version("c", 2));
      await exact.stage(f, "gen-4", version("d", 1));
      // Other files of the worker's database may hold staged chunks: only ours are dated back.
      await sql.query(
        "UPDATE vector_chunks_staged SET staged_at = '2001-01-01' WHERE org = $1 AND file_id = $2 AND generation = 'gen-3'",
        [org, "f_discard"],
      );
      expect(await exact.discardStagedBefore(new Date("2001-06-01"))).toBe(2);
      expect(await stagedRows("f_discard")).toBe(1);
      await exact.publish(f, "gen-4", 1, {});
      expect(await texts("f_discard")).toEqual(["d 0"]);
    });

    it("removes a file from one store, from every store of its organization, or a whole store", async () => {
      const other = newId("vs");
      const elsewhere = newId("org");
      for (const f of [file("f_1"), file("f_2"), file("f_1", other), file("f_1", store, elsewhere)])
        await exact.replaceFile(
          f,
          version(`${f.vectorStoreId === store ? "s" : "o"} ${f.org === org ? "" : "x"}`, 2),
          {},
        );
      await exact.stage(file("f_1", other), "gen-1", version("staged", 1));

      await exact.deleteFile(file("f_2"));
      expect(await texts("f_2")).toEqual([]);
      expect(await texts("f_1")).toHaveLength(2);

      await exact.deleteFileEverywhere(org, "f_1");
      expect(await texts("f_1")).toEqual([]);
      expect(await texts("f_1", other)).toEqual([]);
      expect(await stagedRows("f_1")).toBe(0);
      // The same file id in another organization is another file.
      expect(await texts("f_1", store, elsewhere)).toHaveLength(2);

      await exact.replaceFile(file("f_3"), version("kept", 1), {});
      await exact.replaceFile(file("f_3", other), version("gone", 1), {});
      await exact.stage(file("f_4", other), "gen-1", version("staged", 1));
      await exact.deleteStore(org, other);
      expect(await texts("f_3", other)).toEqual([]);
      expect(await stagedRows("f_4")).toBe(0);
      expect(await texts("f_3")).toEqual(["kept 0"]);
      expect(await texts("f_1", store, elsewhere)).toHaveLength(2);
    });

    it("keeps organizations apart, whatever ids a search names", async () => {
      const theirs = newId("org");
      await exact.replaceFile(file("f_shared_id", store, theirs), version("theirs", 2), {});
      await exact.replaceFile(file("f_shared_id"), version("ours", 1), {});
      for (const [, index] of indexes()) {
        const hits = await index().search({
          org,
          vectorStoreIds: [store],
          embedding: query,
          limit: 10,
          readable: allOf(["f_shared_id"]),
        });
        expect(hits.map((h) => h.text)).toEqual(["ours 0"]);
        const decided = decider(new Set(["f_shared_id"]));
        const other = await index().search({
          org: newId("org"),
          vectorStoreIds: [store],
          embedding: query,
          limit: 10,
          readable: decided.readable,
        });
        expect(other).toEqual([]);
        expect(decided.calls).toEqual([]);
      }
    });

    it("searches several stores as one", async () => {
      const [s1, s2] = [newId("vs"), newId("vs")];
      await exact.replaceFile(
        file("f_x", s1),
        chunksOf([axis(5, WIDTH, 0.1)], () => "near"),
        {},
      );
      await exact.replaceFile(
        file("f_y", s2),
        chunksOf([axis(5, WIDTH, 0.5)], () => "farther"),
        {},
      );
      const hits = await exact.search({
        org,
        vectorStoreIds: [s1, s2],
        embedding: axis(5),
        limit: 5,
        readable: allOf(["f_x", "f_y"]),
      });
      expect(hits.map((h) => [h.vectorStoreId, h.text])).toEqual([
        [s1, "near"],
        [s2, "farther"],
      ]);
    });

    it("keeps embeddings of several widths side by side, each search meeting its own width", async () => {
      const wide = (i: number, tilt: number) => axis(i, 24, tilt);
      await exact.replaceFile(
        file("f_w16"),
        chunksOf([axis(7, WIDTH, 0.1)], () => "sixteen"),
        {},
      );
      await exact.replaceFile(
        file("f_w24"),
        chunksOf([wide(7, 0.1)], () => "twenty-four"),
        {},
      );
      for (const [, index] of indexes()) {
        const in24 = await index().search({
          org,
          vectorStoreIds: [store],
          embedding: wide(7, 0),
          limit: 10,
          readable: allOf(["f_w16", "f_w24"]),
        });
        expect(in24.map((h) => h.text)).toEqual(["twenty-four"]);
        const in16 = await index().search({
          org,
          vectorStoreIds: [store],
          embedding: axis(7),
          limit: 10,
          readable: allOf(["f_w16", "f_w24"]),
        });
        expect(in16.map((h) => h.text)).toEqual(["sixteen"]);
      }
      // Another embedding model: the file's chunks of the old width go with the publish.
      await exact.stage(
        file("f_w16"),
        "gen-1",
        chunksOf([wide(7, 0.2)], () => "now twenty-four"),
      );
      await exact.publish(file("f_w16"), "gen-1", 1, {});
      const after = await exact.search({
        org,
        vectorStoreIds: [store],
        embedding: axis(7),
        limit: 10,
        readable: allOf(["f_w16"]),
      });
      expect(after).toEqual([]);
      const wider = await exact.search({
        org,
        vectorStoreIds: [store],
        embedding: wide(7, 0),
        limit: 10,
        readable: allOf(["f_w16"]),
      });
      expect(wider.map((h) => h.text)).toEqual(["now twenty-four"]);
    });

    it("refuses chunks it cannot index, writing nothing", async () => {
      const f = file("f_bad");
      await expect(exact.replaceFile(f, [...version("a", 1), ...version("a", 1)], {})).rejects.toThrow(
        /new place/,
      );
      await expect(
        exact.replaceFile(
          f,
          [
            { index: 0, text: "x", tokenCount: 1, embedding: axis(0, 8) },
            { index: 1, text: "y", tokenCount: 1, embedding: axis(0, 9) },
          ],
          {},
        ),
      ).rejects.toThrow(/one width/);
      await expect(
        exact.stage(f, "g", [{ index: 0, text: "x", tokenCount: -1, embedding: axis(0) }]),
      ).rejects.toThrow(RangeError);
      await expect(
        exact.stage(f, "g", [{ index: 0, text: "x", tokenCount: 1, embedding: new Array(2_001).fill(1) }]),
      ).rejects.toThrow(RangeError);
      expect(await texts("f_bad")).toEqual([]);
      expect(await stagedRows("f_bad")).toBe(0);
      // Text PostgreSQL cannot hold is kept with U+FFFD for U+0000.
      await exact.replaceFile(f, [{ index: 0, text: "a\u0000b", tokenCount: 1, embedding: axis(3) }], {});
      expect(await texts("f_bad")).toEqual(["a\uFFFDb"]);
    });
  });
});
