import { mkdirSync, readdirSync } from "node:fs";
import { dirname, join } from "node:path";
import { DatabaseSync } from "node:sqlite";
import { v1 } from "@authzed/authzed-node";

export const DATABASE_FILE = "relationships.sqlite";
const FORMAT_VERSION = 1;

const SQLITE_BUSY = 5;
const DAMAGED = new Set([11 /* SQLITE_CORRUPT */, 26 /* SQLITE_NOTADB */]);

/** A relationship's identity: what a TOUCH replaces and a DELETE removes (caveat and expiration are not part of it). */
function relationshipKey(r: v1.Relationship): string {
  const s = r.subject;
  return `${r.resource?.objectType}:${r.resource?.objectId}#${r.relation}@${s?.object?.objectType}:${s?.object?.objectId}#${s?.optionalRelation ?? ""}`;
}

function expiresAtMs(r: v1.Relationship): number | null {
  const at = r.optionalExpiresAt;
  return at === undefined ? null : Number(at.seconds) * 1000 + Math.floor(at.nanos / 1e6);
}

/**
 * Every relationship of a data directory, one row each, in one SQLite
 * database, `relationships.sqlite` (see
 * docs/adr/0011-spicedb-local-keeps-relationships-in-sqlite.md). SQLite
 * gives what a hand-written journal would have to: a commit is whole or
 * absent after a crash (the WAL's checksummed frames), and the file never
 * grows with history, only with the relationships it holds.
 *
 * - `journal_mode=WAL`, `synchronous=NORMAL`: a commit is in the WAL file
 *   (the kernel's page cache) when `apply` returns, so it survives `kill -9`
 *   of this process; only a power cut or a kernel crash can lose the last
 *   commits, never corrupt the file. `FULL` would add an fsync per commit, on
 *   the event loop (node:sqlite is synchronous): not worth it for a
 *   development server.
 * - `locking_mode=EXCLUSIVE` and a first `BEGIN EXCLUSIVE`: the connection
 *   holds the file's lock until it closes, so a second server on the same
 *   directory fails at once; the kernel drops the lock however the process
 *   ends, so there is no stale lock file to clean up after `kill -9`.
 */
export class RelationshipStore {
  readonly path: string;
  /** The connection; only tests' hooks use it directly. */
  readonly db: DatabaseSync;
  private readonly upsert;
  private readonly remove;

  private constructor(db: DatabaseSync, path: string) {
    this.db = db;
    this.path = path;
    this.upsert = db.prepare(
      "INSERT INTO relationship (key, relationship, expires_at) VALUES (?, ?, ?) ON CONFLICT (key) DO UPDATE SET relationship = excluded.relationship, expires_at = excluded.expires_at",
    );
    this.remove = db.prepare("DELETE FROM relationship WHERE key = ?");
  }

  /** Opens (or creates) the directory's database and takes its lock. */
  static open(dir: string): RelationshipStore {
    mkdirSync(dir, { recursive: true });
    if (readdirSync(dir).some((file) => /^(journal|snapshot)\.\d{8}$/.test(file)))
      throw new Error(
        `${dir} holds relationships in the journal files of an earlier spicedb-local, which this one does not read: remove the directory to start empty`,
      );
    const path = join(dir, DATABASE_FILE);
    const db = new DatabaseSync(path, { timeout: 0 });
    try {
      db.exec("PRAGMA locking_mode = EXCLUSIVE");
      db.exec("PRAGMA journal_mode = WAL");
      db.exec("PRAGMA synchronous = NORMAL");
      db.exec("BEGIN EXCLUSIVE");
      const { user_version: version } = db.prepare("PRAGMA user_version").get() as { user_version: number };
      if (version > FORMAT_VERSION)
        throw new Error(`${path} was written by a newer spicedb-local (format ${version})`);
      db.exec(
        `CREATE TABLE IF NOT EXISTS relationship (
          key TEXT PRIMARY KEY,
          relationship BLOB NOT NULL, -- authzed.api.v1.Relationship, serialized
          expires_at INTEGER          -- milliseconds since the epoch, NULL if it does not expire
        ) WITHOUT ROWID`,
      );
      db.exec(`PRAGMA user_version = ${FORMAT_VERSION}`);
      db.exec("COMMIT");
      return new RelationshipStore(db, path);
    } catch (err) {
      db.close();
      throw storeError(err, dir);
    }
  }

  /** Removes the relationships expired at `now`; returns how many. */
  dropExpired(now: number): number {
    return Number(this.db.prepare("DELETE FROM relationship WHERE expires_at <= ?").run(now).changes);
  }

  count(): number {
    return (this.db.prepare("SELECT count(*) AS n FROM relationship").get() as { n: number }).n;
  }

  /** Every stored relationship, serialized, `batch` at a time. */
  *batches(batch: number): Generator<v1.Relationship[]> {
    const page = this.db.prepare(
      "SELECT key, relationship FROM relationship WHERE key > ? ORDER BY key LIMIT ?",
    );
    let after = "";
    for (;;) {
      let rows: { key: string; relationship: Uint8Array }[];
      try {
        rows = page.all(after, batch) as typeof rows;
      } catch (err) {
        throw storeError(err, dirname(this.path));
      }
      if (rows.length === 0) return;
      after = rows.at(-1)!.key;
      yield rows.map((row) => v1.Relationship.fromBinary(row.relationship));
    }
  }

  /** Applies one committed transaction's changes, in one SQLite transaction. */
  apply(updates: readonly v1.RelationshipUpdate[]): void {
    this.db.exec("BEGIN");
    try {
      for (const { operation, relationship } of updates) {
        const key = relationshipKey(relationship!);
        if (operation === v1.RelationshipUpdate_Operation.DELETE) this.remove.run(key);
        else this.upsert.run(key, v1.Relationship.toBinary(relationship!), expiresAtMs(relationship!));
      }
      this.db.exec("COMMIT");
    } catch (err) {
      if (this.db.isTransaction) this.db.exec("ROLLBACK");
      throw err;
    }
  }

  close(): void {
    if (this.db.isOpen) this.db.close();
  }
}

/** A SQLite error as what it means for the directory: in use, damaged, or as it is. */
function storeError(err: unknown, dir: string): Error {
  const path = join(dir, DATABASE_FILE);
  const code = (err as { errcode?: number }).errcode;
  if (code === SQLITE_BUSY)
    return new Error(`${dir} is in use by another process (another spicedb-local on the same DATA_DIR)`);
  if (code !== undefined && DAMAGED.has(code))
    return new Error(
      `${path} is damaged (${(err as Error).message}): restore it from a backup, or remove the directory to start empty`,
    );
  return err as Error;
}
