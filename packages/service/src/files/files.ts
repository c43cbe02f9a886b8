import { Readable } from "node:stream";
import type { Clock } from "@gw/core/clock";
import { AppError } from "@gw/core/errors";
import type { Logger } from "@gw/core/logger";
import type { Postgres } from "@gw/core/postgres";
import type { FilesOptions } from "./config.ts";
import { type FileContents, type FileRef, PostgresFileContents } from "./contents.ts";
import { type FilePurpose, FileStore, type StoredFile } from "./store.ts";

/** Bytes of an upload gathered before they are stored as one piece: what an upload holds in memory at most. */
export const PIECE_BYTES = 1024 * 1024;
/** An upload still unfinished this long after it began is swept (Node's servers cut a request after 5 minutes anyway). */
export const ABANDONED_UPLOAD_MS = 60 * 60 * 1000;

/** The file is larger than `FILE_MAX_BYTES`. */
export class FileTooLarge extends AppError {
  constructor(maxBytes: number) {
    super("file_too_large", `The file is larger than the ${maxBytes} bytes a file may have`, {
      param: "file",
    });
    this.name = "FileTooLarge";
  }
}

/** A file's pieces ended short of its size while it was read: it was deleted or swept meanwhile. */
export class FileGoneWhileRead extends AppError {
  constructor(id: string) {
    super("not_found", `The file ${id} was deleted while it was read`);
    this.name = "FileGoneWhileRead";
  }
}

/** The organization's stored files would pass `FILE_STORAGE_QUOTA_BYTES`. */
export class StorageQuotaExceeded extends AppError {
  constructor(quotaBytes: number) {
    super(
      "storage_quota_exceeded",
      `This file would take the organization's stored files past its quota of ${quotaBytes} bytes; delete files or wait for them to expire`,
      { param: "file" },
    );
    this.name = "StorageQuotaExceeded";
  }
}

/**
 * Seams a test injects (production passes none), read at each call so a
 * test may change them.
 */
export interface FileHooks {
  /**
   * Awaited inside the transaction that charges a piece of an upload, once
   * the organization's total is raised and before it commits: a test holds
   * one upload there while another's charge waits on it.
   */
  whileCharging?: (file: FileRef, bytes: number) => Promise<void>;
  /** Called once a piece of an upload is stored, with the bytes stored so far (while the rest still arrives). */
  afterStore?: (file: FileRef, storedBytes: number) => void;
}

/**
 * Called with files about to go (deleted by their owner, or swept once
 * expired; the sweep's batches may include uploads abandoned unfinished,
 * which nothing was made from), after their relationships and before their
 * bytes and records: what was made from a file (a vector store's chunks of
 * it) goes with it. A listener that throws stops the removal, which the
 * sweep tries again at its next run (the files are already invisible to
 * every read), an owner's delete too (`delete` marks the file expired first).
 */
export type FilesRemovedListener = (files: FileRef[]) => Promise<void>;

/** The size of an upload once its whole file part has been stored. */
export interface StagedUpload extends FileRef {
  bytes: number;
  createdAt: Date;
}

/**
 * Uploaded files: their records (`FileStore`), their bytes (a
 * `FileContents`, PostgreSQL's by default), the organization's quota and the
 * file size limit, and the listeners of removals. An upload's bytes are
 * stored while they arrive (`stage`), a piece of `PIECE_BYTES` at a time,
 * each charged to the organization before it is written; the upload becomes
 * a file only when `complete`d.
 */
export class Files {
  readonly store: FileStore;
  private readonly contents: FileContents;
  private readonly clock: Clock;
  private readonly options: FilesOptions;
  private readonly hooks: FileHooks;
  private readonly logger: Logger | undefined;
  private readonly listeners: FilesRemovedListener[] = [];

  constructor(
    db: Postgres,
    deps: {
      clock: Clock;
      options: FilesOptions;
      contents?: FileContents;
      hooks?: FileHooks;
      logger?: Logger;
    },
  ) {
    this.store = new FileStore(db, deps.clock);
    this.contents = deps.contents ?? new PostgresFileContents(db);
    this.clock = deps.clock;
    this.options = deps.options;
    this.hooks = deps.hooks ?? {};
    this.logger = deps.logger;
  }

  /** `FILE_RETENTION`, in milliseconds: a file's life when its upload names none. */
  get retentionMs(): number {
    return this.options.retentionMs;
  }

  /** `FILE_MAX_BYTES`. */
  get maxBytes(): number {
    return this.options.maxBytes;
  }

  /** Adds a listener of removals (see `FilesRemovedListener`). */
  onRemove(listener: FilesRemovedListener): void {
    this.listeners.push(listener);
  }

  /**
   * Stores the bytes of `stream` as the upload `file` while they arrive: a
   * record (`uploading`, invisible) first, then each piece charged and
   * written before the next is read. Throws `FileTooLarge` past
   * `FILE_MAX_BYTES`, `StorageQuotaExceeded` past the quota; what was stored
   * then stays for the caller to `discard`.
   */
  async stage(
    file: FileRef & { filename: string; contentType: string },
    stream: Readable,
  ): Promise<StagedUpload> {
    const createdAt = new Date(this.clock.wall());
    await this.store.begin(file, createdAt, new Date(createdAt.getTime() + ABANDONED_UPLOAD_MS));
    let stored = 0;
    let seq = 0;
    let held: Buffer[] = [];
    let heldBytes = 0;
    const flush = async () => {
      if (heldBytes === 0) return;
      const piece = held.length === 1 ? held[0]! : Buffer.concat(held, heldBytes);
      held = [];
      heldBytes = 0;
      const whileCharging = this.hooks.whileCharging;
      if (
        !(await this.store.charge(
          file,
          piece.length,
          this.options.quotaBytes,
          whileCharging && (() => whileCharging(file, piece.length)),
        ))
      )
        throw new StorageQuotaExceeded(this.options.quotaBytes);
      await this.contents.append(file, seq++, piece);
      stored += piece.length;
      this.hooks.afterStore?.(file, stored);
    };
    for await (const chunk of stream as AsyncIterable<Buffer>) {
      if (stored + heldBytes + chunk.length > this.options.maxBytes)
        throw new FileTooLarge(this.options.maxBytes);
      held.push(chunk);
      heldBytes += chunk.length;
      if (heldBytes >= PIECE_BYTES) await flush();
    }
    await flush();
    return { org: file.org, id: file.id, bytes: stored, createdAt };
  }

  /** Makes a staged upload a file; `undefined` when the upload is gone meanwhile. */
  complete(
    file: FileRef,
    details: { purpose: FilePurpose; expiresAt: Date },
  ): Promise<StoredFile | undefined> {
    return this.store.complete(file, details);
  }

  /**
   * Removes what an upload that will not become a file stored (its bytes,
   * its record, refunded to the quota); the listeners are not told, as it
   * never was a file. A failure is logged (the sweep removes it later).
   */
  async discard(file: FileRef): Promise<void> {
    await this.contents
      .remove([file])
      .then(() => this.store.delete([file]))
      .catch((err: Error) =>
        this.logger?.warn(
          { err: err.message, file: file.id },
          "could not remove a failed upload; the sweep will",
        ),
      );
  }

  /**
   * An owner's delete, once the file's relationships are gone: the record
   * is marked expired first, so whatever the removal cannot finish now (a
   * listener or the database failing) the next sweep does.
   */
  async delete(file: FileRef): Promise<void> {
    await this.store.expire(file, new Date(this.clock.wall()));
    await this.remove([file]);
  }

  get(org: string, id: string): Promise<StoredFile | undefined> {
    return this.store.get(org, id);
  }

  getMany(org: string, ids: string[]): Promise<StoredFile[]> {
    return this.store.getMany(org, ids);
  }

  /** The file's bytes, a piece at a time. */
  /**
   * A complete file's bytes, a piece at a time; throws `FileGoneWhileRead`
   * (after what was read) when its pieces end short of its size, as when it
   * is deleted or swept meanwhile, so a reader never takes part of a file
   * for the whole.
   */
  async *content(file: FileRef & { bytes: number }): AsyncIterable<Buffer> {
    let read = 0;
    for await (const piece of this.contents.read(file)) {
      read += piece.length;
      yield piece;
    }
    if (read !== file.bytes) throw new FileGoneWhileRead(file.id);
  }

  /**
   * A live file's record and its bytes as a stream read a piece at a time
   * as it is consumed, for what reads a file whole (a vector store's
   * ingestion); `undefined` when the organization has no such file, or it
   * expired. Whether the principal may read it is the caller's to decide
   * first (reader on the `file` in SpiceDB), as the routes do.
   */
  async open(org: string, id: string): Promise<{ file: StoredFile; stream: Readable } | undefined> {
    const file = await this.store.get(org, id);
    if (!file) return undefined;
    return { file, stream: Readable.from(this.content({ ...file, org }), { objectMode: false }) };
  }

  /**
   * Removes files: the listeners first, then their bytes, then their
   * records (refunding their bytes to the quota). With `expiredBy`, only the
   * records still expired by then go (the sweep's). The records deleted.
   */
  async remove(files: FileRef[], expiredBy?: Date): Promise<number> {
    if (files.length === 0) return 0;
    for (const listener of this.listeners) await listener(files);
    await this.contents.remove(files);
    return this.store.delete(files, expiredBy);
  }

  /** The organization's stored bytes, as charged to its quota. */
  usage(org: string): Promise<number> {
    return this.store.usage(org);
  }
}
