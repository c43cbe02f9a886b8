import type { DatabaseSync } from "node:sqlite";
import { v1 } from "@authzed/authzed-node";
import * as grpc from "@grpc/grpc-js";
import { withDeadline } from "@gw/core/deadline";
import type { FfiMethodPath, SpiceDBEngine } from "../engine.ts";
import { revisionOf } from "./revision.ts";
import { RelationshipStore } from "./store.ts";

const WRITE: FfiMethodPath = "/authzed.api.v1.PermissionsService/WriteRelationships";
const WATCH = "/authzed.api.v1.WatchService/Watch";
/** SpiceDB's default cap on updates in one WriteRelationships. */
const WRITE_BATCH = 1000;
const identity = (b: Buffer) => b;

/** Where a message goes; pino's loggers fit. */
export interface Log {
  info(fields: object, message: string): void;
  warn(fields: object, message: string): void;
  error(fields: object, message: string): void;
}

export interface PersistenceOptions {
  dir: string;
  log: Log;
  /** How often the start logs how far its replay has come. Default one second. */
  progressEveryMs?: number;
  hooks?: PersistenceHooks;
  /** The engine already holds the directory's relationships (`replayInto` filled it): open without a replay. */
  restored?: boolean;
  /** The directory's database, still open, handed over by the persistence of the engine replaced (`detach`). */
  store?: RelationshipStore;
}

/** Points where tests force an interleaving. */
export interface PersistenceHooks {
  /** Once the database is open, before anything is read from it. */
  onStoreOpen?: (db: DatabaseSync) => void;
  /** After the stored relationships are back in the engine, before the Watch that feeds the store opens. */
  beforeWatch?: (engine: SpiceDBEngine) => Promise<void>;
  /** During an engine replacement, once the fresh engine holds what was stored and before it catches up. */
  afterReplayInto?: () => Promise<void>;
  /** As each Watch message arrives: a promise returned holds it, and every later one, until it settles. */
  onWatchMessage?: (message: Buffer) => Promise<void> | undefined;
}

/** What a write that could not be stored answers: the engine has it, the directory does not. */
class NotStored extends Error {
  readonly code = grpc.status.UNAVAILABLE;
}

/**
 * Keeps the engine's relationships in a directory (see `store.ts`). At
 * start, the stored relationships are written back into the (empty,
 * in-memory) engine. From then on the engine's own Watch stream, opened at
 * the revision right after that replay, is applied to the store: every
 * committed change, in commit order. The server answers a write only once
 * `stored` says its revision is in the store.
 */
export class Persistence {
  private readonly engine: SpiceDBEngine;
  private readonly streaming: grpc.Client;
  private readonly store: RelationshipStore;
  private readonly options: PersistenceOptions;
  /** The last revision the Watch reported, and its token: every change up to it is stored. */
  private cursor: string;
  private seen: bigint;
  private readonly waiting: { revision: bigint; resolve: () => void; reject: (err: Error) => void }[] = [];
  private watchCall: grpc.ClientReadableStream<Buffer> | undefined;
  private reconnect: NodeJS.Timeout | undefined;
  /** Messages held back by the `onWatchMessage` hook, in order. */
  private held: Promise<void> | undefined;
  private closing = false;
  /** Set when the store cannot be written; the server then refuses writes. */
  failure: Error | undefined;
  /** Relationships the start wrote back into the engine (0 when opened on a filled engine). */
  restoredCount = 0;

  private constructor(
    engine: SpiceDBEngine,
    streaming: grpc.Client,
    store: RelationshipStore,
    options: PersistenceOptions,
    cursor: string,
  ) {
    this.engine = engine;
    this.streaming = streaming;
    this.store = store;
    this.options = options;
    this.cursor = cursor;
    this.seen = revisionOf(cursor);
  }

  /** Restores the directory's relationships into the engine, then stores every change from there on. */
  static async open(
    engine: SpiceDBEngine,
    streaming: grpc.Client,
    options: PersistenceOptions,
  ): Promise<Persistence> {
    const { log, dir } = options;
    const started = performance.now();
    const store = options.store ?? RelationshipStore.open(dir);
    try {
      if (!options.store) options.hooks?.onStoreOpen?.(store.db);
      const expiredDropped = options.restored ? 0 : store.dropExpired(Date.now());
      const total = options.restored ? 0 : store.count();
      if (!options.restored)
        log.info({ dir, relationships: total }, "restoring relationships from the data directory");
      let restored = 0;
      let logged = performance.now();
      for (const batch of options.restored ? [] : store.batches(WRITE_BATCH)) {
        // The engine is empty and each row is a distinct relationship: CREATE skips the lookup a
        // TOUCH makes, which halves a replay's time.
        await write(
          engine,
          batch.map((relationship) => ({ operation: v1.RelationshipUpdate_Operation.CREATE, relationship })),
        ).catch((err: Error) => {
          throw new Error(
            `the relationships stored in ${dir} could not be written back: ${err.message}. If they no longer fit the schema file, change it back (or migrate them), or remove the directory to start empty.`,
          );
        });
        restored += batch.length;
        if (performance.now() - logged >= (options.progressEveryMs ?? 1_000)) {
          logged = performance.now();
          log.info({ restored, of: total }, "restoring relationships");
        }
      }
      // An empty write commits a revision after the replay: the Watch starts right after it,
      // so a change committed at any moment from here on reaches the store.
      const cursor = await write(engine, []);
      await options.hooks?.beforeWatch?.(engine);
      const persistence = new Persistence(engine, streaming, store, options, cursor);
      log.info(
        { dir, relationships: restored, expiredDropped, ms: Math.round(performance.now() - started) },
        "relationships restored from the data directory",
      );
      persistence.restoredCount = restored;
      persistence.watch();
      return persistence;
    } catch (err) {
      store.close();
      throw err;
    }
  }

  /** Sees every change as it is stored (an engine being filled by `replayInto` catches up with them). */
  tap: ((updates: readonly v1.RelationshipUpdate[]) => void) | undefined;

  /**
   * Writes the stored relationships into another (empty) engine while this
   * one goes on serving: pages by key, so a row changed meanwhile is either
   * read as it is or reached by `tap`, which the caller sets first and
   * replays after, in order (an expired relationship as a delete).
   * Returns how many relationships it wrote.
   */
  async replayInto(engine: SpiceDBEngine): Promise<number> {
    const now = Date.now();
    let written = 0;
    for (const batch of this.store.batches(WRITE_BATCH)) {
      const live = batch.filter((r) => !expired(r, now));
      if (live.length > 0)
        await write(
          engine,
          live.map((relationship) => ({ operation: v1.RelationshipUpdate_Operation.CREATE, relationship })),
        );
      written += live.length;
    }
    return written;
  }

  /** Resolves once every change up to the revision of `token` (a ZedToken of this engine) is stored. */
  stored(token: string): Promise<void> {
    if (this.failure) return Promise.reject(this.failure);
    const revision = revisionOf(token);
    if (revision <= this.seen) return Promise.resolve();
    return new Promise((resolve, reject) => this.waiting.push({ revision, resolve, reject }));
  }

  /** Resolves once every change committed before the call is stored. */
  async sync(): Promise<void> {
    await this.stored(await write(this.engine, []));
  }

  /** Call once the server takes no more requests: stores what is committed, and closes the database. */
  async close(): Promise<void> {
    (await this.detach()).store.close();
  }

  /**
   * Call once no write can reach the engine: stores what is committed and
   * stops following the engine, leaving the database open for the engine
   * that replaces it (no checkpoint of the WAL, no reopening, while writes
   * wait). `caughtUp` is false if the store could not catch up (then the
   * caller must not go on as if every change were stored).
   */
  async detach(): Promise<{ store: RelationshipStore; caughtUp: boolean }> {
    let caughtUp = true;
    try {
      await withDeadline(this.sync(), 10_000, () => new Error("the store did not catch up with the engine"));
    } catch (err) {
      caughtUp = false;
      this.options.log.error({ err: (err as Error).message }, "closing with changes not stored");
    }
    this.closing = true;
    clearTimeout(this.reconnect);
    this.watchCall?.cancel();
    return { store: this.store, caughtUp };
  }

  private watch(): void {
    const request = v1.WatchRequest.toBinary(
      v1.WatchRequest.create({
        optionalStartCursor: { token: this.cursor },
        // Checkpoints report every committed revision, also those without changes: `stored` waits on them.
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
      this.options.log.warn({ err: err?.message }, "the store's Watch stream ended; resuming");
      this.reconnect = setTimeout(() => this.watch(), 100);
    };
    call.on("error", retry);
    call.on("end", () => retry());
  }

  private receive(message: Buffer): void {
    if (this.closing || this.failure) return;
    const response = v1.WatchResponse.fromBinary(message);
    try {
      if (response.updates.length > 0) {
        this.store.apply(response.updates);
        this.tap?.(response.updates);
      }
    } catch (err) {
      this.failure = new NotStored(
        `writes are refused: the data directory cannot be written (${(err as Error).message})`,
      );
      this.options.log.error(
        { err: (err as Error).message },
        "the data directory cannot be written: refusing writes",
      );
      for (const waiter of this.waiting.splice(0)) waiter.reject(this.failure);
      return;
    }
    const token = response.changesThrough?.token;
    if (!token) return;
    this.cursor = token;
    this.seen = revisionOf(token);
    for (let i = this.waiting.length - 1; i >= 0; i--) {
      if (this.waiting[i]!.revision <= this.seen) this.waiting.splice(i, 1)[0]!.resolve();
    }
  }
}

/** Whether a relationship's expiration has passed. */
function expired(relationship: v1.Relationship, now: number): boolean {
  const at = relationship.optionalExpiresAt;
  return at !== undefined && Number(at.seconds) * 1000 + at.nanos / 1e6 <= now;
}

/**
 * Applies changes seen on another engine's Watch to `engine`, in order: a
 * create or touch as a touch (the engine may hold it already), a delete, or a
 * touch of an expired relationship, as a delete (a no-op where absent).
 */
export async function applyChanges(
  engine: SpiceDBEngine,
  changes: readonly v1.RelationshipUpdate[],
): Promise<void> {
  const now = Date.now();
  const updates = changes.map(({ operation, relationship }) =>
    v1.RelationshipUpdate.create({
      operation:
        operation === v1.RelationshipUpdate_Operation.DELETE || expired(relationship!, now)
          ? v1.RelationshipUpdate_Operation.DELETE
          : v1.RelationshipUpdate_Operation.TOUCH,
      relationship: relationship!,
    }),
  );
  // One write may not touch a relationship twice: split where one repeats.
  let batch: v1.RelationshipUpdate[] = [];
  let keys = new Set<string>();
  const flush = async () => {
    if (batch.length > 0) await write(engine, batch);
    batch = [];
    keys = new Set();
  };
  for (const update of updates) {
    const key = JSON.stringify(
      v1.Relationship.toJson({
        ...update.relationship!,
        optionalCaveat: undefined,
        optionalExpiresAt: undefined,
      }),
    );
    if (keys.has(key) || batch.length >= WRITE_BATCH) await flush();
    keys.add(key);
    batch.push(update);
  }
  await flush();
}

/** Commits one WriteRelationships; returns its ZedToken. */
async function write(engine: SpiceDBEngine, updates: v1.RelationshipUpdate[]): Promise<string> {
  const response = await engine.call(
    WRITE,
    v1.WriteRelationshipsRequest.toBinary({ updates, optionalPreconditions: [] }),
  );
  return v1.WriteRelationshipsResponse.fromBinary(response).writtenAt!.token;
}
