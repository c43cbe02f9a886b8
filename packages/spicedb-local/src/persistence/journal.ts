import { type FileHandle, open } from "node:fs/promises";
import { dirname } from "node:path";
import { JOURNAL_HEADER, syncDirectory } from "./data-dir.ts";
import { frame } from "./frames.ts";

/**
 * One journal file, appended to without blocking the caller: `append` queues
 * a record and returns at once; the queue goes to the file in one write per
 * turn, on libuv's threads. The file is flushed to disk (fdatasync) every
 * `syncIntervalMs` while there is something new, like Redis's `appendfsync
 * everysec`: a killed process loses only what was still queued (milliseconds),
 * a machine that loses power at most about that interval.
 */
export class Journal {
  /** The file's size once everything queued is written. */
  bytes = 0;
  private readonly file: Promise<FileHandle>;
  private queue: Buffer[] = [];
  private writing: Promise<void> | undefined;
  private dirty = false;
  /** The last flush asked for; flushes run one after another. */
  private syncing: Promise<void> | undefined;
  private readonly timer: NodeJS.Timeout;
  private failure: Error | undefined;
  readonly path: string;
  private readonly onError: (err: Error) => void;

  /** Opens `path` to append to; a new (empty) file starts with the format header. */
  constructor(path: string, existingBytes: number, syncIntervalMs: number, onError: (err: Error) => void) {
    this.path = path;
    this.bytes = existingBytes;
    this.onError = onError;
    this.file = open(path, "a").then(async (handle) => {
      await syncDirectory(dirname(path));
      return handle;
    });
    this.file.catch((err: Error) => this.fail(err));
    if (existingBytes === 0) this.append(Buffer.from(JSON.stringify(JOURNAL_HEADER)));
    this.timer = setInterval(() => void this.sync().catch((err: Error) => this.fail(err)), syncIntervalMs);
    this.timer.unref();
  }

  append(payload: Uint8Array): void {
    const record = frame(payload);
    this.queue.push(record);
    this.bytes += record.length;
    this.writing ??= this.drain();
  }

  /** Resolves when everything appended so far is written to the file (not yet flushed to disk). */
  async written(): Promise<void> {
    while (this.writing) await this.writing;
    if (this.failure) throw this.failure;
  }

  /** Writes what is queued and flushes the file to disk. */
  sync(): Promise<void> {
    this.syncing = (this.syncing ?? Promise.resolve())
      .catch(() => {})
      .then(async () => {
        await this.written();
        if (!this.dirty) return;
        this.dirty = false;
        await (await this.file).datasync();
      });
    return this.syncing;
  }

  async close(): Promise<void> {
    clearInterval(this.timer);
    try {
      await this.sync();
    } finally {
      await (await this.file.catch(() => undefined))?.close();
    }
  }

  private async drain(): Promise<void> {
    try {
      const file = await this.file;
      while (this.queue.length > 0) {
        const chunk = Buffer.concat(this.queue);
        this.queue = [];
        for (let offset = 0; offset < chunk.length; )
          offset += (await file.write(chunk, offset)).bytesWritten;
        this.dirty = true;
      }
    } catch (err) {
      this.fail(err as Error);
    } finally {
      this.writing = undefined;
    }
  }

  private fail(err: Error): void {
    if (this.failure) return;
    this.failure = err;
    this.queue = [];
    this.onError(err);
  }
}
