import type { Clock } from "@gw/core/clock";
import { type Postgres, postgresCanHold, type Queryable } from "@gw/core/postgres";
import type { Attributes } from "./attribute-filter.ts";

/** A file's chunking: OpenAI's `static` strategy (`auto` is 800 and 400). */
export interface Chunking {
  maxChunkSizeTokens: number;
  chunkOverlapTokens: number;
}

/** OpenAI's `auto` chunking strategy, spelled out. */
export const AUTO_CHUNKING: Chunking = { maxChunkSizeTokens: 800, chunkOverlapTokens: 400 };

export const FILE_STATUSES = ["in_progress", "completed", "failed", "cancelled"] as const;
export type FileStatus = (typeof FILE_STATUSES)[number];

export interface FileCounts {
  in_progress: number;
  completed: number;
  failed: number;
  cancelled: number;
  total: number;
}

/** OpenAI's `VectorStoreObject`. */
export interface VectorStoreObject {
  id: string;
  object: "vector_store";
  created_at: number;
  name: string;
  usage_bytes: number;
  file_counts: FileCounts;
  status: "expired" | "in_progress" | "completed";
  expires_after?: { anchor: "last_active_at"; days: number };
  expires_at: number | null;
  last_active_at: number;
  metadata: Record<string, string>;
}

/** Why an ingestion failed: OpenAI's `last_error`. */
export interface FileError {
  code: "server_error" | "unsupported_file" | "invalid_file";
  message: string;
}

/** OpenAI's `VectorStoreFileObject`. */
export interface VectorStoreFileObject {
  id: string;
  object: "vector_store.file";
  usage_bytes: number;
  created_at: number;
  vector_store_id: string;
  status: FileStatus;
  last_error: FileError | null;
  chunking_strategy: {
    type: "static";
    static: { max_chunk_size_tokens: number; chunk_overlap_tokens: number };
  };
  attributes: Attributes;
}

/** OpenAI's `VectorStoreFileBatchObject`. */
export interface FileBatchObject {
  id: string;
  object: "vector_store.files_batch";
  created_at: number;
  vector_store_id: string;
  status: "in_progress" | "completed" | "cancelled" | "failed";
  file_counts: FileCounts;
}

/** A file of a store, as its ingestion reads it. */
export interface IngestionRow {
  status: FileStatus;
  generation: string;
  attempts: number;
  attributes: Attributes;
  chunking: Chunking;
  attachedBy: { user: string; keyId: string };
}

/** A file to attach: who attaches it (their key pays for its embeddings), with what. */
export interface Attachment {
  fileId: string;
  attributes: Attributes;
  chunking: Chunking;
  user: string;
  keyId: string;
  /** The ingestion it starts (its queue job's id too). */
  generation: string;
}

export interface FileRefInStore {
  org: string;
  vectorStoreId: string;
  fileId: string;
}

/** A page of a list: `after` / `before` an id of the list, in `order`. */
export interface ListPage {
  limit: number;
  order: "asc" | "desc";
  after?: string | undefined;
  before?: string | undefined;
}

interface StoreRow {
  id: string;
  name: string;
  metadata: Record<string, string>;
  created_at: Date;
  last_active_at: Date;
  expires_after_days: number | null;
  expires_at: Date | null;
  usage_bytes: string;
  in_progress: number;
  completed: number;
  failed: number;
  cancelled: number;
}

interface FileRow {
  vector_store_id: string;
  file_id: string;
  created_at: Date;
  status: FileStatus;
  last_error: FileError | null;
  attributes: Attributes;
  max_chunk_size_tokens: number;
  chunk_overlap_tokens: number;
  usage_bytes: string;
}

const seconds = (at: Date) => Math.floor(at.getTime() / 1000);

const countsOf = (r: { in_progress: number; completed: number; failed: number; cancelled: number }) => ({
  in_progress: Number(r.in_progress),
  completed: Number(r.completed),
  failed: Number(r.failed),
  cancelled: Number(r.cancelled),
  total: Number(r.in_progress) + Number(r.completed) + Number(r.failed) + Number(r.cancelled),
});

const storeOf = (row: StoreRow): VectorStoreObject => ({
  id: row.id,
  object: "vector_store",
  created_at: seconds(row.created_at),
  name: row.name,
  usage_bytes: Number(row.usage_bytes),
  file_counts: countsOf(row),
  status: row.in_progress > 0 ? "in_progress" : "completed",
  ...(row.expires_after_days === null
    ? {}
    : { expires_after: { anchor: "last_active_at" as const, days: row.expires_after_days } }),
  expires_at: row.expires_at ? seconds(row.expires_at) : null,
  last_active_at: seconds(row.last_active_at),
  metadata: row.metadata,
});

const fileOf = (row: FileRow): VectorStoreFileObject => ({
  id: row.file_id,
  object: "vector_store.file",
  usage_bytes: Number(row.usage_bytes),
  created_at: seconds(row.created_at),
  vector_store_id: row.vector_store_id,
  status: row.status,
  last_error: row.last_error,
  chunking_strategy: {
    type: "static",
    static: {
      max_chunk_size_tokens: row.max_chunk_size_tokens,
      chunk_overlap_tokens: row.chunk_overlap_tokens,
    },
  },
  attributes: row.attributes,
});

const STORE_COLUMNS =
  "id, name, metadata, created_at, last_active_at, expires_after_days, expires_at, usage_bytes, in_progress, completed, failed, cancelled";
const FILE_COLUMNS =
  "f.vector_store_id, f.file_id, f.created_at, f.status, f.last_error, f.attributes, f.max_chunk_size_tokens, f.chunk_overlap_tokens, f.usage_bytes";
/** A store that is not expired: `$now` is the parameter holding now. */
const liveStore = (now: string, alias = "") => `(${alias}expires_at IS NULL OR ${alias}expires_at > ${now})`;
/**
 * A store's file (`f`) whose file has not expired: an expired file is gone from every read at once, the
 * sweep deleting its row later.
 */
const liveFile = (now: string) =>
  `NOT EXISTS (SELECT 1 FROM files x WHERE x.org = f.org AND x.id = f.file_id AND x.expires_at <= ${now})`;
/**
 * A store (`s`, a row of `stores`) as read: its counts and bytes (kept by the trigger) less those of its files that have
 * expired and are not swept yet (few: the sweep runs every RETENTION_SWEEP_INTERVAL), so that they stay
 * true from the moment a file expires.
 */
const storeRead = (
  stores: string,
  now: string,
) => `SELECT s.id, s.name, s.metadata, s.created_at, s.last_active_at, s.expires_after_days,
       s.expires_at, s.usage_bytes - e.usage_bytes AS usage_bytes, s.in_progress - e.in_progress AS in_progress,
       s.completed - e.completed AS completed, s.failed - e.failed AS failed, s.cancelled - e.cancelled AS cancelled
  FROM ${stores} s
  LEFT JOIN LATERAL (
    SELECT COALESCE(sum(f.usage_bytes), 0) AS usage_bytes,
           count(*) FILTER (WHERE f.status = 'in_progress') AS in_progress,
           count(*) FILTER (WHERE f.status = 'completed') AS completed,
           count(*) FILTER (WHERE f.status = 'failed') AS failed,
           count(*) FILTER (WHERE f.status = 'cancelled') AS cancelled
      FROM files x JOIN vector_store_files f ON f.org = x.org AND f.file_id = x.id
     WHERE x.org = s.org AND x.expires_at <= ${now} AND f.vector_store_id = s.id
  ) e ON true`;
/** When a store of `days` expires, active at `at`. */
const EXPIRES_AT = (at: string, days: string) =>
  `CASE WHEN ${days} IS NULL THEN NULL ELSE ${at} + make_interval(days => ${days}) END`;

/**
 * Vector stores, their files and file batches in PostgreSQL (ids are the
 * service's: `vs_…`, `vsfb_…`; a store's file is named by the file's id).
 * A store past its `expires_at` is absent from every read at once (the
 * sweep deletes it later); a store's `file_counts` and `usage_bytes` are
 * kept by a trigger in the transaction of every change of its files' rows.
 * Who may read or write a store is SpiceDB's, not this store's.
 */
export class VectorStoreStore {
  private readonly db: Postgres;
  private readonly clock: Clock;

  constructor(db: Postgres, clock: Clock) {
    this.db = db;
    this.clock = clock;
  }

  private now(): Date {
    return new Date(this.clock.wall());
  }

  async create(
    org: string,
    store: { id: string; name: string; metadata: Record<string, string>; expiresAfterDays: number | null },
    tx: Queryable = this.db,
  ): Promise<VectorStoreObject> {
    const now = this.now();
    const { rows } = await tx.query<StoreRow>(
      `INSERT INTO vector_stores (org, id, name, metadata, created_at, last_active_at, expires_after_days, expires_at)
       VALUES ($1, $2, $3, $4, $5, $5, $6::integer, ${EXPIRES_AT("$5::timestamptz", "$6::integer")})
       RETURNING ${STORE_COLUMNS}`,
      [org, store.id, store.name, JSON.stringify(store.metadata), now, store.expiresAfterDays],
    );
    return storeOf(rows[0]!);
  }

  /**
   * The store, if it exists in the organization and has not expired: the one
   * question every use of a store asks first (a search included).
   */
  async get(org: string, id: string, tx: Queryable = this.db): Promise<VectorStoreObject | undefined> {
    if (!postgresCanHold(id)) return undefined;
    const { rows } = await tx.query<StoreRow>(
      `${storeRead("vector_stores", "$3")} WHERE s.org = $1 AND s.id = $2 AND ${liveStore("$3", "s.")}`,
      [org, id, this.now()],
    );
    return rows[0] && storeOf(rows[0]);
  }

  /** The live stores among `ids`, in no particular order. */
  async getMany(org: string, ids: readonly string[]): Promise<VectorStoreObject[]> {
    const held = ids.filter(postgresCanHold);
    if (held.length === 0) return [];
    const { rows } = await this.db.query<StoreRow>(
      `${storeRead("vector_stores", "$3")}
        WHERE s.org = $1 AND s.id = ANY($2::text[]) AND ${liveStore("$3", "s.")}`,
      [org, held, this.now()],
    );
    return rows.map(storeOf);
  }

  /**
   * Marks the live stores among `ids` active now (their expiry moves with it);
   * the ids of those that are live. A search calls it for the stores it reads.
   */
  async touch(org: string, ids: readonly string[], tx: Queryable = this.db): Promise<string[]> {
    const held = ids.filter(postgresCanHold);
    if (held.length === 0) return [];
    const { rows } = await tx.query<{ id: string }>(
      `UPDATE vector_stores SET last_active_at = $3,
              expires_at = ${EXPIRES_AT("$3::timestamptz", "expires_after_days")}
        WHERE org = $1 AND id = ANY($2::text[]) AND ${liveStore("$3")}
        RETURNING id`,
      [org, held, this.now()],
    );
    return rows.map((r) => r.id);
  }

  /** Changes what is given (`expiresAfterDays: null` removes the expiry); the store, active now. */
  async update(
    org: string,
    id: string,
    change: { name?: string; metadata?: Record<string, string>; expiresAfterDays?: number | null },
  ): Promise<VectorStoreObject | undefined> {
    if (!postgresCanHold(id)) return undefined;
    const keepDays = change.expiresAfterDays === undefined;
    const { rows } = await this.db.query<StoreRow>(
      `WITH updated AS (
         UPDATE vector_stores SET
              name = COALESCE($3, name),
              metadata = COALESCE($4::jsonb, metadata),
              expires_after_days = CASE WHEN $5 THEN expires_after_days ELSE $6::integer END,
              last_active_at = $7,
              expires_at = ${EXPIRES_AT("$7::timestamptz", "CASE WHEN $5 THEN expires_after_days ELSE $6::integer END")}
          WHERE org = $1 AND id = $2 AND ${liveStore("$7")}
          RETURNING *)
       ${storeRead("updated", "$7")}`,
      [
        org,
        id,
        change.name ?? null,
        change.metadata === undefined ? null : JSON.stringify(change.metadata),
        keepDays,
        keepDays ? null : change.expiresAfterDays,
        this.now(),
      ],
    );
    return rows[0] && storeOf(rows[0]);
  }

  /** Deletes the store with its files' rows and batches; whether it was there. */
  async delete(org: string, id: string): Promise<boolean> {
    const result = await this.db.query("DELETE FROM vector_stores WHERE org = $1 AND id = $2", [org, id]);
    return (result.rowCount ?? 0) > 0;
  }

  /** Stores past `cutoff`, oldest first, `limit` at most: the sweep's batches. */
  async expired(cutoff: Date, limit: number): Promise<{ org: string; id: string }[]> {
    const { rows } = await this.db.query<{ org: string; id: string }>(
      "SELECT org, id FROM vector_stores WHERE expires_at <= $1 ORDER BY expires_at LIMIT $2",
      [cutoff, limit],
    );
    return rows;
  }

  /** Deletes the stores still expired by `cutoff`; how many. */
  async deleteExpired(stores: { org: string; id: string }[], cutoff: Date): Promise<number> {
    if (stores.length === 0) return 0;
    const result = await this.db.query(
      `DELETE FROM vector_stores s USING unnest($1::text[], $2::text[]) AS x(org, id)
        WHERE s.org = x.org AND s.id = x.id AND s.expires_at <= $3`,
      [stores.map((s) => s.org), stores.map((s) => s.id), cutoff],
    );
    return result.rowCount ?? 0;
  }

  /**
   * Attaches files to a live store, each `in_progress` with a new ingestion
   * (a file attached already starts over), and marks the store active: in
   * one transaction, with the batch's rows when `batchId` is given. The
   * files' objects, in the order given; `undefined` when the store is gone.
   */
  async attach(
    org: string,
    vectorStoreId: string,
    files: readonly Attachment[],
    batch?: { id: string },
  ): Promise<{ files: VectorStoreFileObject[]; batch?: FileBatchObject } | undefined> {
    return this.db.transaction(async (tx) => {
      const now = this.now();
      // Holds the store's row: a delete waits for this transaction, and an expired store takes nothing.
      const live = await tx.query(
        `SELECT 1 FROM vector_stores WHERE org = $1 AND id = $2 AND ${liveStore("$3")} FOR UPDATE`,
        [org, vectorStoreId, now],
      );
      if (live.rowCount !== 1) return undefined;
      await this.touch(org, [vectorStoreId], tx);
      const { rows } = await tx.query<FileRow>(
        `INSERT INTO vector_store_files AS f (org, vector_store_id, file_id, created_at, status, last_error, attributes,
            max_chunk_size_tokens, chunk_overlap_tokens, usage_bytes, attached_by_user, attached_by_key, generation, attempts)
         SELECT $1, $2, x.file_id, $3, 'in_progress', NULL, x.attributes, x.max_size, x.overlap, 0, x.by_user, x.by_key, x.generation, 0
           FROM unnest($4::text[], $5::jsonb[], $6::int[], $7::int[], $8::text[], $9::text[], $10::text[])
                AS x(file_id, attributes, max_size, overlap, by_user, by_key, generation)
         ON CONFLICT (org, vector_store_id, file_id) DO UPDATE SET
            status = 'in_progress', last_error = NULL, attributes = EXCLUDED.attributes,
            max_chunk_size_tokens = EXCLUDED.max_chunk_size_tokens, chunk_overlap_tokens = EXCLUDED.chunk_overlap_tokens,
            usage_bytes = 0, attached_by_user = EXCLUDED.attached_by_user, attached_by_key = EXCLUDED.attached_by_key,
            generation = EXCLUDED.generation, attempts = 0
         RETURNING ${FILE_COLUMNS}`,
        [
          org,
          vectorStoreId,
          now,
          files.map((f) => f.fileId),
          files.map((f) => JSON.stringify(f.attributes)),
          files.map((f) => f.chunking.maxChunkSizeTokens),
          files.map((f) => f.chunking.chunkOverlapTokens),
          files.map((f) => f.user),
          files.map((f) => f.keyId),
          files.map((f) => f.generation),
        ],
      );
      const byId = new Map(rows.map((r) => [r.file_id, fileOf(r)]));
      const attached = files.map((f) => byId.get(f.fileId)!);
      if (!batch) return { files: attached };
      await tx.query(
        "INSERT INTO vector_store_file_batches (org, id, vector_store_id, created_at) VALUES ($1, $2, $3, $4)",
        [org, batch.id, vectorStoreId, now],
      );
      await tx.query(
        `INSERT INTO vector_store_file_batch_files (org, batch_id, file_id)
         SELECT $1, $2, unnest($3::text[])`,
        [org, batch.id, files.map((f) => f.fileId)],
      );
      return { files: attached, batch: (await this.getBatch(org, vectorStoreId, batch.id, tx))! };
    });
  }

  async getFile(
    org: string,
    vectorStoreId: string,
    fileId: string,
  ): Promise<VectorStoreFileObject | undefined> {
    if (!postgresCanHold(vectorStoreId) || !postgresCanHold(fileId)) return undefined;
    const { rows } = await this.db.query<FileRow>(
      `SELECT ${FILE_COLUMNS} FROM vector_store_files f JOIN vector_stores s ON s.org = f.org AND s.id = f.vector_store_id
        WHERE f.org = $1 AND f.vector_store_id = $2 AND f.file_id = $3 AND ${liveStore("$4", "s.")}
          AND ${liveFile("$4")}`,
      [org, vectorStoreId, fileId, this.now()],
    );
    return rows[0] && fileOf(rows[0]);
  }

  /**
   * A page of a live store's files (of one batch, with `batchId`), by
   * creation then id, newest first unless `order` is `asc`: `undefined` when
   * `after` or `before` names no file of the list; `null` when the store is gone.
   */
  async listFiles(
    org: string,
    vectorStoreId: string,
    page: ListPage & { status?: FileStatus | undefined; batchId?: string | undefined },
  ): Promise<{ files: VectorStoreFileObject[]; hasMore: boolean } | undefined | null> {
    if (!(await this.get(org, vectorStoreId))) return null;
    const anchorId = page.after ?? page.before;
    const inBatch = `($4::text IS NULL OR EXISTS (SELECT 1 FROM vector_store_file_batch_files b
                       WHERE b.org = f.org AND b.batch_id = $4 AND b.file_id = f.file_id))`;
    const now = this.now();
    const filtered = (nowParam: string) =>
      `f.org = $1 AND f.vector_store_id = $2 AND ($3::text IS NULL OR f.status = $3) AND ${inBatch} AND ${liveFile(nowParam)}`;
    let anchor: { created_at: Date; file_id: string } | undefined;
    if (anchorId !== undefined) {
      if (!postgresCanHold(anchorId)) return undefined;
      const found = await this.db.query<{ created_at: Date; file_id: string }>(
        `SELECT f.created_at, f.file_id FROM vector_store_files f WHERE ${filtered("$6")} AND f.file_id = $5`,
        [org, vectorStoreId, page.status ?? null, page.batchId ?? null, anchorId, now],
      );
      anchor = found.rows[0];
      if (!anchor) return undefined;
    }
    // Walking away from the anchor: forwards for `after`, backwards for `before` (then turned around).
    const forwards = page.before === undefined;
    const ascending = (page.order === "asc") === forwards;
    const past = ascending ? ">" : "<";
    const { rows } = await this.db.query<FileRow>(
      `SELECT ${FILE_COLUMNS} FROM vector_store_files f
        WHERE ${filtered("$8")} AND ($5::timestamptz IS NULL OR (f.created_at, f.file_id) ${past} ($5, $6::text))
        ORDER BY f.created_at ${ascending ? "ASC" : "DESC"}, f.file_id ${ascending ? "ASC" : "DESC"}
        LIMIT $7`,
      [
        org,
        vectorStoreId,
        page.status ?? null,
        page.batchId ?? null,
        anchor?.created_at ?? null,
        anchor?.file_id ?? null,
        page.limit + 1,
        now,
      ],
    );
    const hasMore = rows.length > page.limit;
    const files = rows.slice(0, page.limit).map(fileOf);
    if (!forwards) files.reverse();
    return { files, hasMore };
  }

  /** New attributes of a file of a live store; the file, or `undefined`. */
  async setAttributes(
    ref: FileRefInStore,
    attributes: Attributes,
  ): Promise<VectorStoreFileObject | undefined> {
    if (!postgresCanHold(ref.vectorStoreId) || !postgresCanHold(ref.fileId)) return undefined;
    const { rows } = await this.db.query<FileRow>(
      `UPDATE vector_store_files f SET attributes = $4
         FROM vector_stores s
        WHERE f.org = $1 AND f.vector_store_id = $2 AND f.file_id = $3
          AND s.org = f.org AND s.id = f.vector_store_id AND ${liveStore("$5", "s.")} AND ${liveFile("$5")}
        RETURNING ${FILE_COLUMNS}`,
      [ref.org, ref.vectorStoreId, ref.fileId, JSON.stringify(attributes), this.now()],
    );
    return rows[0] && fileOf(rows[0]);
  }

  /** Removes a file from a store (its row: the chunks are the index's); whether it was there. */
  async detach(ref: FileRefInStore): Promise<boolean> {
    if (!postgresCanHold(ref.vectorStoreId) || !postgresCanHold(ref.fileId)) return false;
    const result = await this.db.query(
      "DELETE FROM vector_store_files WHERE org = $1 AND vector_store_id = $2 AND file_id = $3",
      [ref.org, ref.vectorStoreId, ref.fileId],
    );
    return (result.rowCount ?? 0) > 0;
  }

  /** The stores each of the files is in. */
  async storesOf(files: readonly { org: string; id: string }[]): Promise<FileRefInStore[]> {
    if (files.length === 0) return [];
    const { rows } = await this.db.query<{ org: string; vector_store_id: string; file_id: string }>(
      `SELECT f.org, f.vector_store_id, f.file_id
         FROM vector_store_files f JOIN unnest($1::text[], $2::text[]) AS x(org, id) ON f.org = x.org AND f.file_id = x.id`,
      [files.map((f) => f.org), files.map((f) => f.id)],
    );
    return rows.map((r) => ({ org: r.org, vectorStoreId: r.vector_store_id, fileId: r.file_id }));
  }

  /** Removes the files from every store of their organization; the stores each was in. */
  async detachEverywhere(files: readonly { org: string; id: string }[]): Promise<FileRefInStore[]> {
    if (files.length === 0) return [];
    const { rows } = await this.db.query<{ org: string; vector_store_id: string; file_id: string }>(
      `DELETE FROM vector_store_files f USING unnest($1::text[], $2::text[]) AS x(org, id)
        WHERE f.org = x.org AND f.file_id = x.id
        RETURNING f.org, f.vector_store_id, f.file_id`,
      [files.map((f) => f.org), files.map((f) => f.id)],
    );
    return rows.map((r) => ({ org: r.org, vectorStoreId: r.vector_store_id, fileId: r.file_id }));
  }

  // --- ingestion ---

  /**
   * A worker begins (again) the ingestion `generation` of a file: counts the
   * attempt and answers the file's row; `undefined` when that ingestion is
   * no longer the file's current one in progress (the file was removed,
   * attached again, cancelled or finished), or its store is gone.
   */
  async beginAttempt(ref: FileRefInStore, generation: string): Promise<IngestionRow | undefined> {
    const { rows } = await this.db.query<{
      status: FileStatus;
      generation: string;
      attempts: number;
      attributes: Attributes;
      max_chunk_size_tokens: number;
      chunk_overlap_tokens: number;
      attached_by_user: string;
      attached_by_key: string;
    }>(
      `UPDATE vector_store_files f SET attempts = attempts + 1
         FROM vector_stores s
        WHERE f.org = $1 AND f.vector_store_id = $2 AND f.file_id = $3 AND f.generation = $4
          AND f.status = 'in_progress'
          AND s.org = f.org AND s.id = f.vector_store_id AND ${liveStore("$5", "s.")}
        RETURNING f.status, f.generation, f.attempts, f.attributes, f.max_chunk_size_tokens,
                  f.chunk_overlap_tokens, f.attached_by_user, f.attached_by_key`,
      [ref.org, ref.vectorStoreId, ref.fileId, generation, this.now()],
    );
    const row = rows[0];
    if (!row) return undefined;
    return {
      status: row.status,
      generation: row.generation,
      attempts: row.attempts,
      attributes: row.attributes,
      chunking: {
        maxChunkSizeTokens: row.max_chunk_size_tokens,
        chunkOverlapTokens: row.chunk_overlap_tokens,
      },
      attachedBy: { user: row.attached_by_user, keyId: row.attached_by_key },
    };
  }

  /** Whether `generation` is still the file's ingestion in progress (a worker asks between batches). */
  async stillIngesting(ref: FileRefInStore, generation: string): Promise<boolean> {
    const { rowCount } = await this.db.query(
      `SELECT 1 FROM vector_store_files
        WHERE org = $1 AND vector_store_id = $2 AND file_id = $3 AND generation = $4 AND status = 'in_progress'`,
      [ref.org, ref.vectorStoreId, ref.fileId, generation],
    );
    return rowCount === 1;
  }

  /** Whether any ingestion of the file is in progress (it was attached again). */
  async stillIngestingAny(ref: FileRefInStore): Promise<boolean> {
    const { rowCount } = await this.db.query(
      `SELECT 1 FROM vector_store_files
        WHERE org = $1 AND vector_store_id = $2 AND file_id = $3 AND status = 'in_progress'`,
      [ref.org, ref.vectorStoreId, ref.fileId],
    );
    return rowCount === 1;
  }

  /** The file's attributes now (they may have changed while it was ingested). */
  async attributesOf(ref: FileRefInStore): Promise<Attributes | undefined> {
    const { rows } = await this.db.query<{ attributes: Attributes }>(
      "SELECT attributes FROM vector_store_files WHERE org = $1 AND vector_store_id = $2 AND file_id = $3",
      [ref.org, ref.vectorStoreId, ref.fileId],
    );
    return rows[0]?.attributes;
  }

  /**
   * Ends the ingestion `generation` of a file, if it is still the file's
   * ingestion in progress: `completed` with the bytes of its chunks, or
   * `failed` with why. Whether it was (else the file was removed, attached
   * again or cancelled meanwhile, and this ingestion's outcome is not its).
   */
  async finish(
    ref: FileRefInStore,
    generation: string,
    outcome: { status: "completed"; usageBytes: number } | { status: "failed"; error: FileError },
  ): Promise<boolean> {
    const { rowCount } = await this.db.query(
      `UPDATE vector_store_files SET status = $5, usage_bytes = $6, last_error = $7
        WHERE org = $1 AND vector_store_id = $2 AND file_id = $3 AND generation = $4 AND status = 'in_progress'`,
      [
        ref.org,
        ref.vectorStoreId,
        ref.fileId,
        generation,
        outcome.status,
        outcome.status === "completed" ? outcome.usageBytes : 0,
        outcome.status === "failed" ? JSON.stringify(outcome.error) : null,
      ],
    );
    return rowCount === 1;
  }

  // --- file batches ---

  async getBatch(
    org: string,
    vectorStoreId: string,
    batchId: string,
    tx: Queryable = this.db,
  ): Promise<FileBatchObject | undefined> {
    if (!postgresCanHold(vectorStoreId) || !postgresCanHold(batchId)) return undefined;
    const { rows } = await tx.query<{
      id: string;
      vector_store_id: string;
      created_at: Date;
      cancelled: boolean;
      in_progress: string;
      completed: string;
      failed: string;
      cancelled_files: string;
    }>(
      `SELECT b.id, b.vector_store_id, b.created_at, b.cancelled,
              count(*) FILTER (WHERE f.status = 'in_progress') AS in_progress,
              count(*) FILTER (WHERE f.status = 'completed') AS completed,
              count(*) FILTER (WHERE f.status = 'failed') AS failed,
              count(*) FILTER (WHERE f.status = 'cancelled') AS cancelled_files
         FROM vector_store_file_batches b
         JOIN vector_stores s ON s.org = b.org AND s.id = b.vector_store_id AND ${liveStore("$4", "s.")}
         LEFT JOIN vector_store_file_batch_files bf ON bf.org = b.org AND bf.batch_id = b.id
         LEFT JOIN vector_store_files f
           ON f.org = b.org AND f.vector_store_id = b.vector_store_id AND f.file_id = bf.file_id
        WHERE b.org = $1 AND b.vector_store_id = $2 AND b.id = $3
        GROUP BY b.id, b.vector_store_id, b.created_at, b.cancelled`,
      [org, vectorStoreId, batchId, this.now()],
    );
    const row = rows[0];
    if (!row) return undefined;
    const file_counts = countsOf({
      in_progress: Number(row.in_progress),
      completed: Number(row.completed),
      failed: Number(row.failed),
      cancelled: Number(row.cancelled_files),
    });
    const status =
      file_counts.in_progress > 0
        ? "in_progress"
        : row.cancelled
          ? "cancelled"
          : file_counts.total > 0 && file_counts.failed === file_counts.total
            ? "failed"
            : "completed";
    return {
      id: row.id,
      object: "vector_store.files_batch",
      created_at: seconds(row.created_at),
      vector_store_id: row.vector_store_id,
      status,
      file_counts,
    };
  }

  /**
   * Cancels a batch: its files still in progress become `cancelled` (their
   * workers drop what they made at their next step), in one transaction.
   * The batch, or `undefined`.
   */
  async cancelBatch(
    org: string,
    vectorStoreId: string,
    batchId: string,
  ): Promise<FileBatchObject | undefined> {
    return this.db.transaction(async (tx) => {
      if (!(await this.getBatch(org, vectorStoreId, batchId, tx))) return undefined;
      await tx.query("UPDATE vector_store_file_batches SET cancelled = true WHERE org = $1 AND id = $2", [
        org,
        batchId,
      ]);
      await tx.query(
        `UPDATE vector_store_files f SET status = 'cancelled'
           FROM vector_store_file_batch_files b
          WHERE b.org = $1 AND b.batch_id = $3 AND f.org = b.org AND f.vector_store_id = $2
            AND f.file_id = b.file_id AND f.status = 'in_progress'`,
        [org, vectorStoreId, batchId],
      );
      return this.getBatch(org, vectorStoreId, batchId, tx);
    });
  }
}
