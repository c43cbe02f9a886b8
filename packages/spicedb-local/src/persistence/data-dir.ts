import { constants } from "node:fs";
import { copyFile, mkdir, open, readdir, readFile, rename, rm, truncate, unlink } from "node:fs/promises";
import { join } from "node:path";
import { v1 } from "@authzed/authzed-node";
import { frame, readFrames } from "./frames.ts";

/** Where a message goes; pino's loggers fit. */
export interface Log {
  info(fields: object, message: string): void;
  warn(fields: object, message: string): void;
  error(fields: object, message: string): void;
}

/*
 * The directory holds `snapshot.<seq>` (every relationship at one revision) and
 * `journal.<seq>` files (every committed change after it, in commit order).
 * Snapshot K holds the state after every journal below K, so the state is the
 * newest snapshot plus the journals from its number up. Sequence numbers only
 * grow; a file whose name does not match (`*.tmp`, `*.damaged`) is not read.
 */
const FILE = /^(snapshot|journal)\.(\d{8})$/;
const name = (kind: "snapshot" | "journal", seq: number) => `${kind}.${String(seq).padStart(8, "0")}`;
export const journalPath = (dir: string, seq: number) => join(dir, name("journal", seq));
export const JOURNAL_HEADER = { format: "spicedb-local journal", version: 1 };
const SNAPSHOT_FORMAT = "spicedb-local snapshot";

const json = (value: unknown) => Buffer.from(JSON.stringify(value));

/** A relationship's identity: what a TOUCH replaces and a DELETE removes (caveat and expiration are not part of it). */
function relationshipKey(r: v1.Relationship): string {
  const s = r.subject;
  return `${r.resource?.objectType}:${r.resource?.objectId}#${r.relation}@${s?.object?.objectType}:${s?.object?.objectId}#${s?.optionalRelation ?? ""}`;
}

export function isExpired(r: v1.Relationship, now: number): boolean {
  const at = r.optionalExpiresAt;
  return at !== undefined && Number(at.seconds) * 1000 + at.nanos / 1e6 <= now;
}

export interface LoadedState {
  /** Every relationship of the newest snapshot and the journals after it, in a fold of their changes. */
  relationships: Map<string, v1.Relationship>;
  snapshotBytes: number;
  /** Bytes of every journal read. */
  journalBytes: number;
  /** The journal to append to (the newest, or a new one), and its size. */
  journal: { seq: number; bytes: number };
}

/**
 * Reads the directory's state. A journal that ends inside a record (a write cut
 * short by kill -9) is cut back to its last whole record; one with a damaged
 * record is copied to `<name>.damaged` and cut back to the record before, and
 * later journals are set aside as `.damaged` too, since they build on what was
 * lost. What is dropped is logged. A damaged snapshot stops the start: it holds
 * everything, and guessing would lose data silently.
 */
export async function loadDataDir(dir: string, log: Log): Promise<LoadedState> {
  await mkdir(dir, { recursive: true });
  const files = (await readdir(dir))
    .map((file) => FILE.exec(file))
    .filter((m) => m !== null)
    .map((m) => ({ kind: m[1] as "snapshot" | "journal", seq: Number(m[2]), path: join(dir, m[0]) }))
    .sort((a, b) => a.seq - b.seq);
  let journal = { seq: (files.at(-1)?.seq ?? 0) + 1, bytes: 0 };
  const snapshot = files.filter((f) => f.kind === "snapshot").at(-1);
  const relationships = new Map<string, v1.Relationship>();
  let snapshotBytes = 0;
  if (snapshot) {
    const data = await readFile(snapshot.path);
    snapshotBytes = data.length;
    for (const relationship of readSnapshot(data, snapshot.path))
      relationships.set(relationshipKey(relationship), relationship);
  }

  let journalBytes = 0;
  let damagedFrom: string | undefined;
  for (const file of files.filter((f) => f.kind === "journal" && f.seq >= (snapshot?.seq ?? 0))) {
    if (damagedFrom) {
      await rename(file.path, `${file.path}.damaged`);
      log.error({ file: file.path, after: damagedFrom }, "journal set aside: it follows a damaged one");
      continue;
    }
    const data = await readFile(file.path);
    const scan = readFrames(data);
    const [header, ...changes] = scan.payloads;
    if (header && JSON.parse(header.toString()).format !== JOURNAL_HEADER.format)
      throw new Error(`${file.path} is not a journal of this server`);
    for (const payload of changes) {
      for (const update of v1.WatchResponse.fromBinary(payload).updates) {
        const relationship = update.relationship!;
        if (update.operation === v1.RelationshipUpdate_Operation.DELETE)
          relationships.delete(relationshipKey(relationship));
        else relationships.set(relationshipKey(relationship), relationship);
      }
    }
    journalBytes += scan.validBytes;
    journal = { seq: file.seq, bytes: scan.validBytes };
    if (!scan.problem) continue;
    const dropped = { file: file.path, offset: scan.validBytes, droppedBytes: data.length - scan.validBytes };
    if (scan.problem === "corrupt") {
      await copyFile(file.path, `${file.path}.damaged`);
      damagedFrom = file.path;
      log.error(
        { ...dropped, copy: `${file.path}.damaged` },
        "journal record failed its checksum: replayed what came before it and dropped the rest",
      );
    } else {
      log.warn(dropped, "journal ends inside a record (a write cut short): dropped that partial record");
    }
    await truncate(file.path, scan.validBytes);
  }
  return { relationships, snapshotBytes, journalBytes, journal };
}

function readSnapshot(data: Buffer, path: string): v1.Relationship[] {
  const scan = readFrames(data);
  const [header, ...rest] = scan.payloads;
  const footer = rest.pop();
  const count = footer ? (JSON.parse(footer.toString()) as { count?: number }).count : undefined;
  if (
    scan.problem ||
    !header ||
    JSON.parse(header.toString()).format !== SNAPSHOT_FORMAT ||
    count !== rest.length
  )
    throw new Error(
      `${path} is damaged (${scan.problem ?? "incomplete"}) and holds the relationships the journals build on: restore it from a backup, or remove the directory to start empty`,
    );
  return rest.map((payload) => v1.Relationship.fromBinary(payload));
}

/**
 * Writes `snapshot.<seq>` from serialized relationships: to a temporary file,
 * flushed to disk, then renamed, so a snapshot file is always whole. Returns
 * its size in bytes.
 */
export async function writeSnapshot(
  dir: string,
  seq: number,
  revision: string,
  relationships: AsyncIterable<Uint8Array> | Iterable<Uint8Array>,
): Promise<number> {
  const path = join(dir, name("snapshot", seq));
  const file = await open(`${path}.tmp`, "w");
  let bytes = 0;
  let count = 0;
  let batch: Buffer[] = [];
  const write = async () => {
    const chunk = Buffer.concat(batch);
    batch = [];
    bytes += chunk.length;
    await file.write(chunk);
  };
  try {
    batch.push(frame(json({ format: SNAPSHOT_FORMAT, version: 1, revision, createdAt: new Date() })));
    for await (const relationship of relationships) {
      batch.push(frame(relationship));
      count++;
      if (batch.length >= 1024) await write();
    }
    batch.push(frame(json({ count })));
    await write();
    await file.datasync();
  } catch (err) {
    await file.close();
    await rm(`${path}.tmp`, { force: true });
    throw err;
  }
  await file.close();
  await rename(`${path}.tmp`, path);
  await syncDirectory(dir);
  return bytes;
}

/** Removes the snapshots and journals numbered below `seq`, now that snapshot `seq` holds their state. */
export async function removeBefore(dir: string, seq: number): Promise<void> {
  for (const file of await readdir(dir)) {
    const match = FILE.exec(file) ?? /^(snapshot)\.(\d{8})\.tmp$/.exec(file);
    if (match && Number(match[2]) < seq) await unlink(join(dir, file));
  }
}

/** Makes a created or renamed file's directory entry durable. */
export async function syncDirectory(dir: string): Promise<void> {
  const handle = await open(dir, constants.O_RDONLY);
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

/**
 * Claims the directory for this process (`LOCK` holds its pid), so two servers
 * never write one journal. A lock left by a process that is gone is taken over.
 */
export async function lockDataDir(dir: string): Promise<() => Promise<void>> {
  await mkdir(dir, { recursive: true });
  const path = join(dir, "LOCK");
  const holder = await readFile(path, "utf8").then(Number, () => undefined);
  if (holder && isRunning(holder))
    throw new Error(
      `${dir} is in use by process ${holder} (another spicedb-local on the same DATA_DIR; if there is none, remove ${path})`,
    );
  const file = await open(path, "w");
  await file.writeFile(String(process.pid));
  await file.close();
  return () => rm(path, { force: true });
}

function isRunning(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
}
