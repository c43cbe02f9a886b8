import type { Clock } from "@gw/core/clock";
import { type Postgres, postgresCanHold } from "@gw/core/postgres";
import type { FileRef } from "./contents.ts";

/** The purposes an upload may name, as OpenAI's `CreateFileRequest` lists them. */
export const FILE_PURPOSES = ["assistants", "batch", "fine-tune", "vision", "user_data", "evals"] as const;
export type FilePurpose = (typeof FILE_PURPOSES)[number];

/** OpenAI's `File` object, as the API answers it. */
export interface FileObject {
  id: string;
  object: "file";
  bytes: number;
  created_at: number;
  expires_at: number;
  filename: string;
  purpose: FilePurpose;
  /** OpenAI's deprecated status: a file here is whole once listed, so always `processed`. */
  status: "processed";
}

/** A complete file as stored: its object, and the media type its upload declared. */
export interface StoredFile extends FileObject {
  contentType: string;
}

interface FileRow {
  id: string;
  filename: string;
  purpose: FilePurpose;
  content_type: string;
  bytes: string;
  created_at: Date;
  expires_at: Date;
}

const seconds = (at: Date) => Math.floor(at.getTime() / 1000);

const fileOf = (row: FileRow): StoredFile => ({
  id: row.id,
  object: "file",
  bytes: Number(row.bytes),
  created_at: seconds(row.created_at),
  expires_at: seconds(row.expires_at),
  filename: row.filename,
  purpose: row.purpose,
  status: "processed",
  contentType: row.content_type,
});

/** Complete files not yet expired: `$3` is now. */
const LIVE = "status = 'processed' AND expires_at > $3";
const COLUMNS = "id, filename, purpose, content_type, bytes, created_at, expires_at";

/**
 * What files are, in PostgreSQL's `files` (one row each, keyed by
 * organization), and each organization's stored bytes in `file_storage`.
 * A file is `uploading` while its bytes arrive, invisible to every read,
 * then `processed`; one past its `expires_at` is absent from every read at
 * once, and the retention sweeper deletes it later. Who may read a file is
 * SpiceDB's (`file` resources), not the store's.
 */
export class FileStore {
  private readonly db: Postgres;
  private readonly clock: Clock;

  constructor(db: Postgres, clock: Clock) {
    this.db = db;
    this.clock = clock;
  }

  private now(): Date {
    return new Date(this.clock.wall());
  }

  /** The record of an upload that begins now, which the sweep removes after `abandonAt` unless it completes. */
  async begin(
    file: FileRef & { filename: string; contentType: string },
    createdAt: Date,
    abandonAt: Date,
  ): Promise<void> {
    await this.db.query(
      `INSERT INTO files (org, id, filename, content_type, status, created_at, expires_at)
       VALUES ($1, $2, $3, $4, 'uploading', $5, $6)`,
      [file.org, file.id, file.filename, file.contentType, createdAt, abandonAt],
    );
  }

  /**
   * Charges `bytes` more of an upload to its organization, in one
   * transaction with the upload's own count: the organization's total is
   * checked and raised in one statement that holds its row, so two uploads
   * at once never both pass the last free bytes. False (nothing charged)
   * when the quota would be passed. Throws when the upload is gone (swept
   * as abandoned). `held` is awaited once charged, before the commit (tests).
   */
  async charge(
    file: FileRef,
    bytes: number,
    quotaBytes: number,
    held?: () => Promise<void>,
  ): Promise<boolean> {
    return this.db.transaction(async (tx) => {
      const charged = await tx.query(
        `INSERT INTO file_storage (org, bytes) SELECT $1, $2::bigint WHERE $2::bigint <= $3::bigint
         ON CONFLICT (org) DO UPDATE SET bytes = file_storage.bytes + EXCLUDED.bytes
           WHERE file_storage.bytes + EXCLUDED.bytes <= $3::bigint
         RETURNING bytes`,
        [file.org, bytes, quotaBytes],
      );
      if (charged.rowCount !== 1) return false;
      await held?.();
      const counted = await tx.query(
        "UPDATE files SET bytes = bytes + $3 WHERE org = $1 AND id = $2 AND status = 'uploading'",
        [file.org, file.id, bytes],
      );
      if (counted.rowCount !== 1) throw new Error(`the upload of ${file.id} is gone`);
      return true;
    });
  }

  /** Makes an upload a complete file, with its purpose and expiry; `undefined` when the upload is gone. */
  async complete(
    file: FileRef,
    details: { purpose: FilePurpose; expiresAt: Date },
  ): Promise<StoredFile | undefined> {
    const { rows } = await this.db.query<FileRow>(
      `UPDATE files SET status = 'processed', purpose = $3, expires_at = $4
        WHERE org = $1 AND id = $2 AND status = 'uploading'
        RETURNING ${COLUMNS}`,
      [file.org, file.id, details.purpose, details.expiresAt],
    );
    return rows[0] && fileOf(rows[0]);
  }

  async get(org: string, id: string): Promise<StoredFile | undefined> {
    if (!postgresCanHold(id)) return undefined;
    const { rows } = await this.db.query<FileRow>(
      `SELECT ${COLUMNS} FROM files WHERE org = $1 AND id = $2 AND ${LIVE}`,
      [org, id, this.now()],
    );
    return rows[0] && fileOf(rows[0]);
  }

  /** The complete, live files among `ids`, in no particular order. */
  async getMany(org: string, ids: string[]): Promise<StoredFile[]> {
    const held = ids.filter(postgresCanHold);
    if (held.length === 0) return [];
    const { rows } = await this.db.query<FileRow>(
      `SELECT ${COLUMNS} FROM files WHERE org = $1 AND id = ANY($2::text[]) AND ${LIVE}`,
      [org, held, this.now()],
    );
    return rows.map(fileOf);
  }

  /** Makes a complete file expired as of `at` (an owner's delete, before its removal). */
  async expire(file: FileRef, at: Date): Promise<void> {
    await this.db.query(
      "UPDATE files SET expires_at = LEAST(expires_at, $3) WHERE org = $1 AND id = $2 AND status = 'processed'",
      [file.org, file.id, at],
    );
  }

  /** Files (complete or not) past `cutoff`, oldest first, `limit` at most: the sweep's batches. */
  async expired(cutoff: Date, limit: number): Promise<FileRef[]> {
    const { rows } = await this.db.query<FileRef>(
      "SELECT org, id FROM files WHERE expires_at <= $1 ORDER BY expires_at LIMIT $2",
      [cutoff, limit],
    );
    return rows;
  }

  /**
   * Deletes the files' records (`expiredBy`: only those still past it) and
   * refunds their bytes to their organizations, in one statement. The
   * number of records deleted.
   */
  async delete(files: FileRef[], expiredBy?: Date): Promise<number> {
    if (files.length === 0) return 0;
    const { rows } = await this.db.query<{ n: string }>(
      `WITH gone AS (
         DELETE FROM files f USING unnest($1::text[], $2::text[]) AS x(org, id)
          WHERE f.org = x.org AND f.id = x.id AND ($3::timestamptz IS NULL OR f.expires_at <= $3)
          RETURNING f.org, f.bytes),
       freed AS (SELECT org, sum(bytes) AS bytes FROM gone GROUP BY org),
       refunded AS (
         UPDATE file_storage s SET bytes = s.bytes - freed.bytes FROM freed WHERE s.org = freed.org RETURNING 1)
       SELECT (SELECT count(*) FROM gone) AS n, (SELECT count(*) FROM refunded) AS refunded`,
      [files.map((f) => f.org), files.map((f) => f.id), expiredBy ?? null],
    );
    return Number(rows[0]?.n ?? 0);
  }

  /** The organization's stored bytes, as charged. */
  async usage(org: string): Promise<number> {
    const { rows } = await this.db.query<{ bytes: string }>("SELECT bytes FROM file_storage WHERE org = $1", [
      org,
    ]);
    return Number(rows[0]?.bytes ?? 0);
  }
}
