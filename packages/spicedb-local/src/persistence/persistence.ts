import { v1 } from "@authzed/authzed-node";
import * as grpc from "@grpc/grpc-js";
import { BinaryReader } from "@protobuf-ts/runtime";
import type { FfiMethodPath, SpiceDBEngine } from "../engine.ts";
import {
  isExpired,
  journalPath,
  type Log,
  loadDataDir,
  lockDataDir,
  removeBefore,
  writeSnapshot,
} from "./data-dir.ts";
import { Journal } from "./journal.ts";
import { revisionOf } from "./revision.ts";

const WRITE: FfiMethodPath = "/authzed.api.v1.PermissionsService/WriteRelationships";
const READ_SCHEMA: FfiMethodPath = "/authzed.api.v1.SchemaService/ReadSchema";
const WATCH = "/authzed.api.v1.WatchService/Watch";
const READ = "/authzed.api.v1.PermissionsService/ReadRelationships";
/** How often new journal records are flushed to disk, like Redis's `appendfsync everysec`. */
const SYNC_INTERVAL_MS = 1_000;
/** SpiceDB's default cap on updates in one WriteRelationships. */
const WRITE_BATCH = 1000;
const identity = (b: Buffer) => b;

export interface PersistenceOptions {
  dir: string;
  /** A snapshot is written once the journals since the last one reach this size and the snapshot's own. */
  snapshotAfterBytes: number;
  log: Log;
  hooks?: PersistenceHooks;
}

/** Points where tests force an interleaving. */
export interface PersistenceHooks {
  /** After the stored relationships are back in the engine, before the Watch that feeds the journal opens. */
  beforeWatch?: (engine: SpiceDBEngine) => Promise<void>;
  /** During a compaction: after the switch to a new journal, before the snapshot is read from the engine. */
  beforeSnapshotRead?: () => Promise<void>;
  /** As each Watch message arrives: a promise returned holds it, and every later one, until it settles. */
  onWatchMessage?: (message: Buffer) => Promise<void> | undefined;
}

/**
 * Keeps the engine's relationships in a directory. At start, the newest
 * snapshot and the journals after it are folded and written back into the
 * (empty, in-memory) engine. From then on the engine's own Watch stream,
 * opened at the revision right after that replay, is appended to a journal:
 * every committed change, in commit order. Compaction switches to a new
 * journal right after some record at revision S, then reads every
 * relationship at exactly S (`at_exact_snapshot`) into a snapshot, so the
 * snapshot plus the new journal is the whole state, and the old files go.
 */
export class Persistence {
  private readonly engine: SpiceDBEngine;
  private readonly streaming: grpc.Client;
  private readonly options: PersistenceOptions;
  private readonly unlock: () => Promise<void>;
  private journal: Journal;
  /** The previous journal's close, after a switch to a new one. */
  private retiring: Promise<void> = Promise.resolve();
  private seq: number;
  /** Bytes of the journals before the current one that the newest snapshot does not hold yet. */
  private olderJournalBytes: number;
  private snapshotBytes: number;
  /** The last revision the Watch reported, and its token: every change up to it is journaled. */
  private cursor: string;
  private seen: bigint;
  private readonly waiting: { revision: bigint; resolve: () => void }[] = [];
  private watchCall: grpc.ClientReadableStream<Buffer> | undefined;
  private reconnect: NodeJS.Timeout | undefined;
  private exportCall: grpc.ClientReadableStream<Buffer> | undefined;
  /** Messages held back by the `onWatchMessage` hook, in order. */
  private held: Promise<void> | undefined;
  private compacting: Promise<void> | undefined;
  private compactAfter = 0;
  private closing = false;
  /** Set when the journal cannot be written; the server then refuses writes. */
  failure: Error | undefined;

  private constructor(init: {
    engine: SpiceDBEngine;
    streaming: grpc.Client;
    options: PersistenceOptions;
    unlock: () => Promise<void>;
    journal: { seq: number; bytes: number };
    olderJournalBytes: number;
    snapshotBytes: number;
    cursor: string;
  }) {
    this.engine = init.engine;
    this.streaming = init.streaming;
    this.options = init.options;
    this.unlock = init.unlock;
    this.seq = init.journal.seq;
    this.olderJournalBytes = init.olderJournalBytes;
    this.snapshotBytes = init.snapshotBytes;
    this.cursor = init.cursor;
    this.seen = revisionOf(init.cursor);
    this.journal = this.openJournal(init.journal.seq, init.journal.bytes);
  }

  /** Restores the directory's relationships into the engine, then journals every change from there on. */
  static async open(
    engine: SpiceDBEngine,
    streaming: grpc.Client,
    options: PersistenceOptions,
  ): Promise<Persistence> {
    const started = performance.now();
    const unlock = await lockDataDir(options.dir);
    try {
      const state = await loadDataDir(options.dir, options.log);
      const now = Date.now();
      const live = [...state.relationships.values()].filter((r) => !isExpired(r, now));
      for (let i = 0; i < live.length; i += WRITE_BATCH) {
        await write(
          engine,
          live.slice(i, i + WRITE_BATCH).map((relationship) => ({
            operation: v1.RelationshipUpdate_Operation.TOUCH,
            relationship,
          })),
        ).catch((err: Error) => {
          throw new Error(
            `the relationships stored in ${options.dir} could not be written back: ${err.message}. If they no longer fit the schema file, change it back (or migrate them), or remove the directory to start empty.`,
          );
        });
      }
      // An empty write commits a revision after the replay: the Watch starts right after it,
      // so a change committed at any moment from here on reaches the journal.
      const cursor = await write(engine, []);
      await options.hooks?.beforeWatch?.(engine);
      const persistence = new Persistence({
        engine,
        streaming,
        options,
        unlock,
        journal: state.journal,
        olderJournalBytes: state.journalBytes - state.journal.bytes,
        snapshotBytes: state.snapshotBytes,
        cursor,
      });
      options.log.info(
        {
          dir: options.dir,
          relationships: live.length,
          expiredDropped: state.relationships.size - live.length,
          snapshotBytes: state.snapshotBytes,
          journalBytes: state.journalBytes,
          ms: Math.round(performance.now() - started),
        },
        "relationships restored from the data directory",
      );
      persistence.watch();
      persistence.compactIfDue();
      return persistence;
    } catch (err) {
      await unlock();
      throw err;
    }
  }

  /**
   * Resolves once every change committed before the call is in the journal
   * file and flushed to disk.
   */
  async sync(): Promise<void> {
    const head = revisionOf(await write(this.engine, []));
    if (this.seen < head)
      await new Promise<void>((resolve) => this.waiting.push({ revision: head, resolve }));
    await this.retiring;
    await this.journal.sync();
  }

  /** Writes a snapshot now (or joins the one being written). */
  compact(): Promise<void> {
    this.compacting ??= this.runCompaction().finally(() => {
      this.compacting = undefined;
    });
    return this.compacting;
  }

  /** Call once the server takes no more requests: journals what is committed, flushes it, and lets go of the directory. */
  async close(): Promise<void> {
    try {
      await withTimeout(this.sync(), 10_000, "the journal did not catch up with the engine");
    } catch (err) {
      this.options.log.error({ err: (err as Error).message }, "closing with changes not journaled");
    }
    this.closing = true;
    clearTimeout(this.reconnect);
    this.watchCall?.cancel();
    this.exportCall?.cancel();
    await this.compacting?.catch(() => {});
    await this.journal.close().catch(() => {});
    await this.unlock();
  }

  private openJournal(seq: number, existingBytes = 0): Journal {
    const path = journalPath(this.options.dir, seq);
    return new Journal(path, existingBytes, SYNC_INTERVAL_MS, (err) => {
      this.failure ??= err;
      this.options.log.error({ err: err.message }, "the journal cannot be written: refusing writes");
    });
  }

  private watch(): void {
    const request = v1.WatchRequest.toBinary(
      v1.WatchRequest.create({
        optionalStartCursor: { token: this.cursor },
        // Checkpoints report every committed revision, also those without changes: `sync` waits on them.
        optionalUpdateKinds: [v1.WatchKind.INCLUDE_RELATIONSHIP_UPDATES, v1.WatchKind.INCLUDE_CHECKPOINTS],
      }),
    );
    const call = this.streaming.makeServerStreamRequest(
      WATCH,
      identity,
      identity,
      Buffer.from(request),
      new grpc.Metadata(),
      {},
    );
    this.watchCall = call;
    call.on("data", (message: Buffer) => {
      const hold = this.options.hooks?.onWatchMessage?.(message);
      if (!hold && !this.held) return this.receive(message);
      this.held = (this.held ?? Promise.resolve()).then(() => hold).then(() => this.receive(message));
    });
    const retry = (err?: Error) => {
      if (this.closing || this.watchCall !== call) return;
      this.watchCall = undefined;
      // The engine drops a watcher that falls behind; resuming at the cursor loses nothing.
      this.options.log.warn({ err: err?.message }, "journal's Watch stream ended; resuming");
      this.reconnect = setTimeout(() => this.watch(), 100);
    };
    call.on("error", retry);
    call.on("end", () => retry());
  }

  private receive(message: Buffer): void {
    const response = v1.WatchResponse.fromBinary(message);
    if (response.updates.length > 0) this.journal.append(message);
    const token = response.changesThrough?.token;
    if (!token) return;
    this.cursor = token;
    this.seen = revisionOf(token);
    for (let i = this.waiting.length - 1; i >= 0; i--) {
      if (this.waiting[i]!.revision <= this.seen) this.waiting.splice(i, 1)[0]!.resolve();
    }
    if (response.updates.length > 0) this.compactIfDue();
  }

  private compactIfDue(): void {
    const journalBytes = this.olderJournalBytes + this.journal.bytes;
    if (this.compacting || this.closing || Date.now() < this.compactAfter) return;
    if (journalBytes < Math.max(this.options.snapshotAfterBytes, this.snapshotBytes)) return;
    this.compact().catch((err: Error) => {
      if (this.closing) return;
      this.compactAfter = Date.now() + 10_000;
      this.options.log.warn({ err: err.message }, "snapshot failed; the journals still hold every change");
    });
  }

  private async runCompaction(): Promise<void> {
    const started = performance.now();
    const at = this.cursor;
    const previous = this.journal;
    this.seq++;
    this.journal = this.openJournal(this.seq);
    this.olderJournalBytes += previous.bytes;
    this.retiring = previous.close();
    await this.retiring;
    await this.options.hooks?.beforeSnapshotRead?.();
    const bytes = await writeSnapshot(this.options.dir, this.seq, at, this.relationshipsAt(at));
    await removeBefore(this.options.dir, this.seq);
    this.options.log.info(
      {
        journalBytes: this.olderJournalBytes,
        snapshotBytes: bytes,
        ms: Math.round(performance.now() - started),
      },
      "snapshot written; the journals it replaces are removed",
    );
    this.snapshotBytes = bytes;
    this.olderJournalBytes = 0;
  }

  /** Every relationship at exactly revision `at`, serialized, type by type. */
  private async *relationshipsAt(at: string): AsyncGenerator<Uint8Array> {
    const schema = await this.engine
      .call(READ_SCHEMA, v1.ReadSchemaRequest.toBinary({}))
      .then((bytes) => v1.ReadSchemaResponse.fromBinary(bytes).schemaText)
      .catch((err: { code?: number }) => {
        if (err.code === grpc.status.NOT_FOUND) return ""; // no schema, so no relationships
        throw err;
      });
    for (const resourceType of definitions(schema)) {
      if (this.closing) throw new Error("the server is closing");
      const request = v1.ReadRelationshipsRequest.create({
        consistency: { requirement: { oneofKind: "atExactSnapshot", atExactSnapshot: { token: at } } },
        relationshipFilter: v1.RelationshipFilter.create({ resourceType }),
      });
      const call = this.streaming.makeServerStreamRequest(
        READ,
        identity,
        identity,
        Buffer.from(v1.ReadRelationshipsRequest.toBinary(request)),
        new grpc.Metadata(),
        {},
      );
      this.exportCall = call;
      for await (const message of call as AsyncIterable<Buffer>) {
        const relationship = relationshipBytes(message);
        if (relationship) yield relationship;
      }
    }
  }
}

/**
 * The `relationship` field (2) of a serialized ReadRelationshipsResponse, as
 * the engine encoded it: decoding it and the per-result cursor beside it only
 * to encode it again would double a compaction's time.
 */
function relationshipBytes(message: Buffer): Uint8Array | undefined {
  const reader = new BinaryReader(message);
  while (reader.pos < reader.len) {
    const [field, wireType] = reader.tag();
    if (field === 2) return reader.bytes();
    reader.skip(wireType);
  }
  return undefined;
}

/** Commits one WriteRelationships; returns its ZedToken. */
async function write(engine: SpiceDBEngine, updates: v1.RelationshipUpdate[]): Promise<string> {
  const response = await engine.call(
    WRITE,
    v1.WriteRelationshipsRequest.toBinary({ updates, optionalPreconditions: [] }),
  );
  return v1.WriteRelationshipsResponse.fromBinary(response).writtenAt!.token;
}

/** The object definitions a schema text declares (not its caveats). */
function definitions(schema: string): string[] {
  const code = schema.replace(/\/\*[\s\S]*?\*\//g, "").replace(/\/\/[^\n]*/g, "");
  return [...code.matchAll(/\bdefinition\s+([a-z][a-z0-9_/]*)\s*\{/g)].map((m) => m[1]!);
}

function withTimeout<T>(promise: Promise<T>, ms: number, message: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    promise,
    new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(message)), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}
