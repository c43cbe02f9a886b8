/**
 * The vector index on PostgreSQL with pgvector 0.8 or later (`VECTOR_DATABASE_URL`;
 * locally PGlite's build of pgvector, the same SQL): docs/adr/0020-vector-engine.md.
 *
 * Chunks live in `vector_chunks`, partitioned by embedding width, each width's
 * partition with an HNSW index (cosine distance) over the embedding cast to
 * its width (packages/core/vector-migrations/vector_0001_chunks.sql).
 *
 * A search returns the `limit` nearest readable chunks whenever that many
 * exist, never "the nearest ten, then drop those the caller may not read":
 * - few candidates (the chunks of readable files that pass the filter, at most
 *   `exactSearchMaxRows`): every one's distance is computed, exactly;
 * - more: the HNSW index is scanned with the readable files and the filter as
 *   conditions, with pgvector's iterative index scan (`hnsw.iterative_scan`),
 *   which goes on past the first candidates until enough pass them (up to
 *   `hnsw.max_scan_tuples`); when that still finds too few, the exact search
 *   answers instead.
 * With a `decide` callback instead of a list of readable files, pages of the
 * nearest candidates are fetched in turn, their files decided in one call a
 * page, and the files refused are left out of the next page, until the page
 * holds enough readable chunks or nothing is left.
 */
import {
  createPostgres,
  migrateVectorDatabase,
  type Postgres,
  type PostgresQueryObserver,
  postgresCanHold,
  type Queryable,
} from "@gw/core/postgres";
import { type Attributes, compileAttributeFilter } from "./attribute-filter.ts";
import {
  type ChunkInput,
  type FileInStore,
  MAX_EMBEDDING_DIMENSIONS,
  MAX_SEARCH_RESULTS,
  type SearchHit,
  type SearchRequest,
  StagedChunksMismatch,
  type VectorIndex,
} from "./vector-index.ts";

export interface PgVectorIndexOptions {
  /** The vector database (`VECTOR_DATABASE_URL`). */
  url: string;
  /** Connections kept at most. Default 10. */
  maxConnections?: number;
  /** `application_name` of its connections. Default `vector-index`. */
  connectionName?: string;
  /** Server-side limit on one statement, in milliseconds. Default 10000. */
  statementTimeoutMs?: number;
  metrics?: PostgresQueryObserver;
  onIdleError?: (err: Error) => void;
  /** Searches with at most this many candidates compute every candidate's distance instead of using the HNSW index. Default 2000. */
  exactSearchMaxRows?: number;
  /** Index tuples an HNSW scan visits at most before it stops looking for candidates that pass its conditions (`hnsw.max_scan_tuples`). Default 20000, pgvector's. */
  maxScanTuples?: number;
}

/** PostgreSQL's text cannot hold U+0000: a chunk's text has it replaced (U+FFFD) rather than refused. */
const storable = (text: string) => (postgresCanHold(text) ? text : text.replaceAll("\u0000", "\uFFFD"));

/** An embedding as pgvector's text input, checked: 1 to 2,000 finite numbers, not all zero. */
function vectorText(values: ArrayLike<number>, what: string): { text: string; width: number } {
  const width = values?.length;
  if (!Number.isInteger(width) || width < 1 || width > MAX_EMBEDDING_DIMENSIONS)
    throw new RangeError(
      `${what} has ${width} dimensions; from 1 to ${MAX_EMBEDDING_DIMENSIONS} are indexed`,
    );
  const parts = new Array<number>(width);
  let direction = false;
  for (let i = 0; i < width; i++) {
    const v = values[i];
    if (typeof v !== "number" || !Number.isFinite(v))
      throw new RangeError(`${what} holds a value that is not a finite number`);
    if (v !== 0) direction = true;
    parts[i] = v;
  }
  // A cosine distance to a zero vector is not a number: it would sort anywhere.
  if (!direction) throw new RangeError(`${what} is all zeros`);
  return { text: `[${parts.join(",")}]`, width };
}

/** A file's chunks as the column arrays of an `unnest`, checked: one width, distinct places. */
function chunkColumns(chunks: readonly ChunkInput[]) {
  const columns = {
    index: [] as number[],
    text: [] as string[],
    tokens: [] as number[],
    embedding: [] as string[],
  };
  let width: number | undefined;
  const seen = new Set<number>();
  for (const chunk of chunks) {
    if (
      !Number.isInteger(chunk.index) ||
      chunk.index < 0 ||
      chunk.index > 2_147_483_647 ||
      seen.has(chunk.index)
    )
      throw new RangeError(`chunk index ${chunk.index} is not a new place in the file`);
    if (!Number.isInteger(chunk.tokenCount) || chunk.tokenCount < 0 || chunk.tokenCount > 2_147_483_647)
      throw new RangeError(`chunk ${chunk.index} has a token count of ${chunk.tokenCount}`);
    seen.add(chunk.index);
    const vector = vectorText(chunk.embedding, `the embedding of chunk ${chunk.index}`);
    if (width !== undefined && vector.width !== width)
      throw new RangeError(`the chunks of one file have one width: ${width} and ${vector.width}`);
    width = vector.width;
    columns.index.push(chunk.index);
    columns.text.push(storable(String(chunk.text)));
    columns.tokens.push(chunk.tokenCount);
    columns.embedding.push(vector.text);
  }
  return { ...columns, width };
}

/**
 * The text and embeddings one insert carries at most (a chunk larger than this goes alone). Several
 * small statements rather than one of a whole batch: the local vector database (PGlite) was seen to
 * stall on statements of a few hundred kilobytes, and a staged ingestion or a replace in a
 * transaction is as whole either way.
 */
const INSERT_BYTES = 32 * 1024;

/** The chunk columns cut into runs of at most `INSERT_BYTES` of text and embeddings. */
function* insertSlices(columns: ReturnType<typeof chunkColumns>) {
  let start = 0;
  let bytes = 0;
  for (let i = 0; i <= columns.index.length; i++) {
    const size = i < columns.index.length ? columns.text[i]!.length + columns.embedding[i]!.length : 0;
    if (i === columns.index.length || (i > start && bytes + size > INSERT_BYTES)) {
      if (i > start)
        yield {
          index: columns.index.slice(start, i),
          text: columns.text.slice(start, i),
          tokens: columns.tokens.slice(start, i),
          embedding: columns.embedding.slice(start, i),
        };
      start = i;
      bytes = 0;
    }
    bytes += size;
  }
}

/** A transaction-scoped lock on one file of one store: its writes (replace, publish, delete) one at a time. */
const LOCK_FILE = "SELECT pg_advisory_xact_lock(hashtextextended($1, 0))";
const fileLockKey = (file: FileInStore) =>
  JSON.stringify(["vector-file", file.org, file.vectorStoreId, file.fileId]);
/** A lock for creating a width's partition (creating the same table twice at once fails). */
const WIDTH_LOCK = "SELECT pg_advisory_xact_lock(hashtextextended('vector-width', 0))";

/** The partition of a width and its HNSW index. `width` is an integer from 1 to 2,000 (checked by `vectorText`). */
function widthDdl(width: number): string[] {
  const table = `vector_chunks_${width}`;
  return [
    `CREATE TABLE IF NOT EXISTS ${table} PARTITION OF vector_chunks FOR VALUES IN (${width})`,
    `CREATE INDEX IF NOT EXISTS ${table}_embedding ON ${table} USING hnsw ((embedding::vector(${width})) vector_cosine_ops)`,
  ];
}

interface HitRow {
  vector_store_id: string;
  file_id: string;
  chunk_index: number;
  text: string;
  attributes: Attributes;
  token_count: number;
  distance: number;
}

/** One statement's conditions and parameters, built up. */
class Conditions {
  readonly values: unknown[] = [];
  readonly where: string[] = [];
  add = (value: unknown): string => {
    this.values.push(value);
    return `$${this.values.length}`;
  };
}

export class PgVectorIndex implements VectorIndex {
  private readonly db: Postgres;
  private readonly url: string;
  private readonly exactMaxRows: number;
  private readonly maxScanTuples: number;
  private prepared: Promise<void> | undefined;
  /** Widths whose partition is known to exist. */
  private readonly widths = new Set<number>();

  constructor(options: PgVectorIndexOptions) {
    this.url = options.url;
    const maxConnections = options.maxConnections ?? 10;
    this.db = createPostgres(options.url, {
      connectionName: options.connectionName ?? "vector-index",
      maxConnections,
      statementTimeoutMs: options.statementTimeoutMs ?? 10_000,
      ...(options.metrics ? { metrics: options.metrics } : {}),
      ...(options.onIdleError ? { onIdleError: options.onIdleError } : {}),
    });
    this.exactMaxRows = options.exactSearchMaxRows ?? 2_000;
    this.maxScanTuples = options.maxScanTuples ?? 20_000;
  }

  prepare(): Promise<void> {
    this.prepared ??= migrateVectorDatabase(this.url).then(
      () => undefined,
      (err: unknown) => {
        // The next call tries again (the database may come back).
        this.prepared = undefined;
        throw err;
      },
    );
    return this.prepared;
  }

  /** The partition of `width` and its index, created once (empty then: no scan of other widths' rows). */
  private async ensureWidth(width: number): Promise<void> {
    if (this.widths.has(width)) return;
    const { rows } = await this.db.query<{ found: string | null }>("SELECT to_regclass($1)::text AS found", [
      `vector_chunks_${width}`,
    ]);
    if (!rows[0]?.found)
      await this.db.transaction(async (tx) => {
        await tx.query(WIDTH_LOCK);
        for (const statement of widthDdl(width)) await tx.query(statement);
      });
    this.widths.add(width);
  }

  /** Inserts chunks into `table` (live or staged) in one statement. */
  private async insert(
    tx: Queryable,
    file: FileInStore,
    all: ReturnType<typeof chunkColumns>,
    target: { live: Attributes } | { generation: string },
  ): Promise<void> {
    for (const columns of insertSlices(all)) {
      const common = [file.org, file.vectorStoreId, file.fileId, all.width];
      if ("live" in target)
        await tx.query(
          `INSERT INTO vector_chunks (org, vector_store_id, file_id, dimensions, attributes, chunk_index, text, token_count, embedding)
           SELECT $1, $2, $3, $4, $5::jsonb, c.i, c.t, c.n, c.e
             FROM unnest($6::int[], $7::text[], $8::int[], $9::vector[]) AS c(i, t, n, e)`,
          [
            ...common,
            JSON.stringify(target.live),
            columns.index,
            columns.text,
            columns.tokens,
            columns.embedding,
          ],
        );
      else
        await tx.query(
          `INSERT INTO vector_chunks_staged (org, vector_store_id, file_id, dimensions, generation, chunk_index, text, token_count, embedding)
           SELECT $1, $2, $3, $4, $5, c.i, c.t, c.n, c.e
             FROM unnest($6::int[], $7::text[], $8::int[], $9::vector[]) AS c(i, t, n, e)`,
          [...common, target.generation, columns.index, columns.text, columns.tokens, columns.embedding],
        );
    }
  }

  async replaceFile(file: FileInStore, chunks: readonly ChunkInput[], attributes: Attributes): Promise<void> {
    const columns = chunkColumns(chunks);
    await this.prepare();
    if (columns.width !== undefined) await this.ensureWidth(columns.width);
    await this.db.transaction(async (tx) => {
      await tx.query(LOCK_FILE, [fileLockKey(file)]);
      await this.removeFile(tx, file);
      await this.insert(tx, file, columns, { live: attributes });
    });
  }

  async stage(file: FileInStore, generation: string, chunks: readonly ChunkInput[]): Promise<void> {
    const columns = chunkColumns(chunks);
    await this.prepare();
    await this.insert(this.db, file, columns, { generation });
  }

  async publish(
    file: FileInStore,
    generation: string,
    expectedChunks: number,
    attributes: Attributes,
  ): Promise<void> {
    await this.prepare();
    const key = [file.org, file.vectorStoreId, file.fileId, generation];
    const widths = await this.db.query<{ width: number }>(
      `SELECT DISTINCT dimensions AS width FROM vector_chunks_staged
        WHERE org = $1 AND vector_store_id = $2 AND file_id = $3 AND generation = $4`,
      key,
    );
    if (widths.rows.length > 1) throw new RangeError("the staged chunks of one file have one width");
    const width = widths.rows[0]?.width;
    if (width !== undefined) await this.ensureWidth(width);
    await this.db.transaction(async (tx) => {
      await tx.query(LOCK_FILE, [fileLockKey(file)]);
      const staged = await tx.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM vector_chunks_staged
          WHERE org = $1 AND vector_store_id = $2 AND file_id = $3 AND generation = $4`,
        key,
      );
      const found = staged.rows[0]?.n ?? 0;
      if (found !== expectedChunks) throw new StagedChunksMismatch(expectedChunks, found);
      await tx.query(
        "DELETE FROM vector_chunks WHERE org = $1 AND vector_store_id = $2 AND file_id = $3",
        key.slice(0, 3),
      );
      await tx.query(
        `INSERT INTO vector_chunks (org, vector_store_id, file_id, dimensions, attributes, chunk_index, text, token_count, embedding)
         SELECT org, vector_store_id, file_id, dimensions, $5::jsonb, chunk_index, text, token_count, embedding
           FROM vector_chunks_staged
          WHERE org = $1 AND vector_store_id = $2 AND file_id = $3 AND generation = $4`,
        [...key, JSON.stringify(attributes)],
      );
      await tx.query(
        "DELETE FROM vector_chunks_staged WHERE org = $1 AND vector_store_id = $2 AND file_id = $3",
        key.slice(0, 3),
      );
    });
  }

  async discardStaged(file: FileInStore, generation?: string): Promise<void> {
    await this.prepare();
    const key = [file.org, file.vectorStoreId, file.fileId];
    if (generation === undefined)
      await this.db.query(
        "DELETE FROM vector_chunks_staged WHERE org = $1 AND vector_store_id = $2 AND file_id = $3",
        key,
      );
    else
      await this.db.query(
        "DELETE FROM vector_chunks_staged WHERE org = $1 AND vector_store_id = $2 AND file_id = $3 AND generation = $4",
        [...key, generation],
      );
  }

  async discardStagedBefore(cutoff: Date): Promise<number> {
    await this.prepare();
    const { rowCount } = await this.db.query("DELETE FROM vector_chunks_staged WHERE staged_at < $1", [
      cutoff,
    ]);
    return rowCount ?? 0;
  }

  async setAttributes(file: FileInStore, attributes: Attributes): Promise<void> {
    await this.prepare();
    await this.db.query(
      "UPDATE vector_chunks SET attributes = $4::jsonb WHERE org = $1 AND vector_store_id = $2 AND file_id = $3",
      [file.org, file.vectorStoreId, file.fileId, JSON.stringify(attributes)],
    );
  }

  private async removeFile(tx: Queryable, file: FileInStore): Promise<void> {
    const key = [file.org, file.vectorStoreId, file.fileId];
    await tx.query("DELETE FROM vector_chunks WHERE org = $1 AND vector_store_id = $2 AND file_id = $3", key);
    await tx.query(
      "DELETE FROM vector_chunks_staged WHERE org = $1 AND vector_store_id = $2 AND file_id = $3",
      key,
    );
  }

  async deleteFile(file: FileInStore): Promise<void> {
    await this.prepare();
    await this.db.transaction(async (tx) => {
      await tx.query(LOCK_FILE, [fileLockKey(file)]);
      await this.removeFile(tx, file);
    });
  }

  async deleteFileEverywhere(org: string, fileId: string): Promise<void> {
    await this.prepare();
    await this.db.transaction(async (tx) => {
      await tx.query("DELETE FROM vector_chunks WHERE org = $1 AND file_id = $2", [org, fileId]);
      await tx.query("DELETE FROM vector_chunks_staged WHERE org = $1 AND file_id = $2", [org, fileId]);
    });
  }

  async deleteStore(org: string, vectorStoreId: string): Promise<void> {
    await this.prepare();
    await this.db.transaction(async (tx) => {
      await tx.query("DELETE FROM vector_chunks WHERE org = $1 AND vector_store_id = $2", [
        org,
        vectorStoreId,
      ]);
      await tx.query("DELETE FROM vector_chunks_staged WHERE org = $1 AND vector_store_id = $2", [
        org,
        vectorStoreId,
      ]);
    });
  }

  async search(request: SearchRequest): Promise<SearchHit[]> {
    const { limit, minScore } = request;
    if (!Number.isInteger(limit) || limit < 1 || limit > MAX_SEARCH_RESULTS)
      throw new RangeError(`a search returns from 1 to ${MAX_SEARCH_RESULTS} chunks, not ${limit}`);
    if (minScore !== undefined && !Number.isFinite(minScore))
      throw new RangeError("a minimum score is a finite number");
    const query = vectorText(request.embedding, "the query's embedding");
    await this.prepare();
    // Ids PostgreSQL's text cannot hold name nothing stored.
    const scoped = { ...request, vectorStoreIds: request.vectorStoreIds.filter(postgresCanHold) };
    if (scoped.vectorStoreIds.length === 0 || !postgresCanHold(request.org)) return [];
    const readable = request.readable;
    const rows =
      readable.kind === "files"
        ? await this.nearest(scoped, query, limit, readable.fileIds.filter(postgresCanHold), [])
        : await this.nearestDecided(scoped, query, readable.decide);
    const hits = rows.map(
      (row): SearchHit => ({
        vectorStoreId: row.vector_store_id,
        fileId: row.file_id,
        chunkIndex: row.chunk_index,
        text: row.text,
        attributes: row.attributes,
        tokenCount: row.token_count,
        score: 1 - row.distance,
      }),
    );
    // The database compared distances in 32-bit floats: its cut may keep one the score, in 64 bits, puts below.
    return minScore === undefined ? hits : hits.filter((hit) => hit.score >= minScore);
  }

  /**
   * `decide` mode: pages of the nearest chunks of files not yet refused; each page's undecided
   * files decided in one call. A page is the nearest chunks among files not refused, so once it
   * holds `limit` readable ones, they are the nearest readable chunks; while it holds fewer, it held
   * chunks of files now refused, so the next page leaves out more. Each page is twice the last, so
   * a store where the caller may read little takes a few pages, not one per refused file.
   */
  private async nearestDecided(
    request: SearchRequest,
    query: { text: string; width: number },
    decide: (fileIds: readonly string[]) => Promise<ReadonlySet<string>>,
  ): Promise<HitRow[]> {
    let page = Math.max(4 * request.limit, 40);
    const allowed = new Set<string>();
    const refused = new Set<string>();
    // Counted once: a later page has fewer candidates, but if they are too few for the index, it finds
    // too few and the exact search answers anyway.
    const candidates: { many?: boolean } = {};
    for (; ; page = Math.min(2 * page, MAX_SEARCH_RESULTS)) {
      const rows = await this.nearest(request, query, page, undefined, [...refused], candidates);
      const undecided = [...new Set(rows.map((row) => row.file_id))].filter(
        (f) => !allowed.has(f) && !refused.has(f),
      );
      if (undecided.length > 0) {
        const readable = await decide(undecided);
        for (const fileId of undecided) (readable.has(fileId) ? allowed : refused).add(fileId);
      }
      const kept = rows.filter((row) => allowed.has(row.file_id));
      // Enough, or nothing left beyond this page (`nearest` answers fewer only when no more exist).
      if (kept.length >= request.limit || rows.length < page) return kept.slice(0, request.limit);
    }
  }

  /**
   * The `count` nearest chunks of the request's stores (of `readableFiles` if given, of no file of
   * `excludedFiles`) that pass its filter, closest first. Fewer only when fewer exist.
   */
  private async nearest(
    request: SearchRequest,
    query: { text: string; width: number },
    count: number,
    readableFiles: readonly string[] | undefined,
    excludedFiles: readonly string[],
    /** `many`: more candidates than an exact search takes, known (the index is used without counting them) or found. */
    options: { many?: boolean } = {},
  ): Promise<HitRow[]> {
    if (readableFiles?.length === 0) return [];
    const conditions = new Conditions();
    const { add, where } = conditions;
    // The width is an integer checked by `vectorText`: a literal, so the planner picks the width's partition.
    const width = query.width;
    const org = add(request.org);
    where.push(
      `dimensions = ${width}`,
      `org = ${org}`,
      `vector_store_id = ANY(${add(request.vectorStoreIds)}::text[])`,
    );
    if (readableFiles) where.push(`file_id = ANY(${add(readableFiles)}::text[])`);
    if (excludedFiles.length > 0) where.push(`file_id <> ALL(${add(excludedFiles)}::text[])`);
    if (request.filter) where.push(compileAttributeFilter(request.filter, add));
    let queryVector: string | undefined;
    const distanceSql = () => {
      queryVector ??= add(query.text);
      return `embedding::vector(${width}) <=> ${queryVector}::vector(${width})`;
    };
    // Chunks too far to score `minScore` are no candidates: paging (`decide`) stops where they begin.
    if (request.minScore !== undefined)
      where.push(`${distanceSql()} <= ${add(1 - request.minScore)}::float8`);
    const conditionSql = where.join(" AND ");
    // The count below takes these alone: a parameter its text does not use is an error.
    const conditionValues = [...conditions.values];
    const distance = distanceSql();
    const limit = add(count);
    // The chunks found, with what a hit shows, read for those alone.
    const hits = (found: string) => `
      SELECT c.vector_store_id, c.file_id, c.chunk_index, c.text, c.attributes, c.token_count, n.distance
        FROM ${found} n
        JOIN vector_chunks c ON c.dimensions = ${width} AND c.org = ${org} AND c.vector_store_id = n.vector_store_id
                             AND c.file_id = n.file_id AND c.chunk_index = n.chunk_index
       ORDER BY n.distance, c.vector_store_id, c.file_id, c.chunk_index`;
    // Every candidate's distance: a materialized CTE, so its rows are not read in the HNSW index's order.
    const exact = () =>
      this.db.query<HitRow>(
        `WITH candidates AS MATERIALIZED (
           SELECT vector_store_id, file_id, chunk_index, ${distance} AS distance FROM vector_chunks WHERE ${conditionSql}
         ), nearest AS (
           SELECT * FROM candidates ORDER BY distance, vector_store_id, file_id, chunk_index LIMIT ${limit}
         )${hits("nearest")}`,
        conditions.values,
      );

    if (!options.many) {
      const candidates = await this.db.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM (SELECT 1 FROM vector_chunks WHERE ${conditionSql} LIMIT ${this.exactMaxRows + 1}) c`,
        conditionValues,
      );
      if ((candidates.rows[0]?.n ?? 0) <= this.exactMaxRows) return (await exact()).rows;
      options.many = true;
    }

    const indexed = await this.db.transaction(async (tx) => {
      // Iterative scan: past the first `ef_search` candidates until `count` pass the conditions; relaxed order, put
      // right by the outer ORDER BY (pgvector's advice).
      await tx.query(
        `SELECT set_config('hnsw.iterative_scan', 'relaxed_order', true),
                set_config('hnsw.ef_search', $1, true),
                set_config('hnsw.max_scan_tuples', $2, true)`,
        [String(Math.min(1_000, Math.max(40, count))), String(this.maxScanTuples)],
      );
      return tx.query<HitRow>(
        `WITH nearest AS MATERIALIZED (
           SELECT vector_store_id, file_id, chunk_index, ${distance} AS distance FROM vector_chunks
            WHERE ${conditionSql} ORDER BY distance LIMIT ${limit}
         )${hits("nearest")}`,
        conditions.values,
      );
    });
    // The scan gave up before finding enough (they lie far from the query): every distance then.
    return indexed.rows.length < count ? (await exact()).rows : indexed.rows;
  }

  close(): Promise<void> {
    return this.db.close();
  }
}

/** The vector index of a process, on `VECTOR_DATABASE_URL`. */
export function createVectorIndex(options: PgVectorIndexOptions): VectorIndex {
  return new PgVectorIndex(options);
}
