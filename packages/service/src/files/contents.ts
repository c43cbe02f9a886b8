import type { Postgres } from "@gw/core/postgres";

/** A file of an organization. */
export interface FileRef {
  org: string;
  id: string;
}

/**
 * Where files' bytes live: the one interface the files feature stores and
 * reads them through, so another store (an object store) is one more
 * implementation beside `PostgresFileContents`. An upload writes its bytes
 * as numbered pieces while it arrives, never the whole file at once; a read
 * gives them back in order, a piece at a time. What a file is (its name,
 * size, owner, expiry) and the organization's quota are not kept here.
 */
export interface FileContents {
  /** Stores piece `seq` (0, 1, 2…) of the file as it arrives; the file's record exists already. */
  append(file: FileRef, seq: number, data: Buffer): Promise<void>;
  /** The file's pieces in order, each read when the one before has been taken. */
  read(file: FileRef): AsyncIterable<Buffer>;
  /** Removes every piece of the files; nothing for a file that has none. */
  remove(files: FileRef[]): Promise<void>;
}

/**
 * Files' bytes in PostgreSQL's `file_chunks`, one row per piece (a piece is
 * `PIECE_BYTES` or less), every read and write along the primary key
 * `(org, file_id, seq)`. A piece is written in its own statement as it
 * arrives (no connection is held for the length of an upload), and a read
 * asks for one piece at a time, so neither side holds a file in memory. A
 * file's row in `files` takes its pieces with it when deleted.
 */
export class PostgresFileContents implements FileContents {
  private readonly db: Postgres;

  constructor(db: Postgres) {
    this.db = db;
  }

  async append(file: FileRef, seq: number, data: Buffer): Promise<void> {
    await this.db.query("INSERT INTO file_chunks (org, file_id, seq, data) VALUES ($1, $2, $3, $4)", [
      file.org,
      file.id,
      seq,
      data,
    ]);
  }

  async *read(file: FileRef): AsyncIterable<Buffer> {
    for (let seq = 0; ; seq++) {
      const { rows } = await this.db.query<{ data: Buffer }>(
        "SELECT data FROM file_chunks WHERE org = $1 AND file_id = $2 AND seq = $3",
        [file.org, file.id, seq],
      );
      if (!rows[0]) return;
      yield rows[0].data;
    }
  }

  async remove(files: FileRef[]): Promise<void> {
    if (files.length === 0) return;
    await this.db.query(
      `DELETE FROM file_chunks c USING unnest($1::text[], $2::text[]) AS x(org, id)
        WHERE c.org = x.org AND c.file_id = x.id`,
      [files.map((f) => f.org), files.map((f) => f.id)],
    );
  }
}
