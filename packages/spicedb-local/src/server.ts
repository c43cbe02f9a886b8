import { timingSafeEqual } from "node:crypto";
import { readFile } from "node:fs/promises";
import { v1 } from "@authzed/authzed-node";
import * as grpc from "@grpc/grpc-js";
import { EngineError, FFI_METHODS, type FfiMethodPath, isWriteMethod, SpiceDBEngine } from "./engine.ts";
import { addHealthService } from "./health.ts";
import { applyChanges, type Log, Persistence, type PersistenceHooks } from "./persistence/persistence.ts";

export interface SpiceDBLocalOptions {
  host: string;
  /** 0 picks a free port. */
  port: number;
  /** Required as `authorization: Bearer <key>` on every call but health, like `spicedb serve --grpc-preshared-key`. */
  presharedKey: string;
  /** Schema file written at start (e.g. `spicedb/schema.zed`). */
  schemaFile?: string;
  /**
   * Directory that keeps the relationships across restarts (a SQLite
   * database, see `persistence/`). Unset: in memory only, as tests use it.
   */
  dataDir?: string;
  persistenceHooks?: PersistenceHooks;
  /** With `dataDir`: how often the start logs how far its replay has come. Default one second. */
  replayProgressEveryMs?: number;
  logger?: Log;
  /** Port of SpiceDB's own Prometheus metrics (`/metrics`, on `host`). Unset: none. */
  metricsPort?: number;
  /** Sees every authenticated request's method path and serialized message (for tests that check what clients ask). */
  observe?: (path: string, request: Buffer) => void;
  /**
   * With `dataDir` (and no `metricsPort`): after this many writes (at least;
   * see `recycleFraction`), the engine is replaced by a fresh one restored
   * from the data directory, so its memory follows the relationships it
   * holds rather than every write since it started (the in-memory datastore
   * keeps a snapshot and a change-log entry of every write it ever committed:
   * it has no garbage collection, whatever its GC window says). 0 or unset: never.
   */
  recycleAfterWrites?: number;
  /**
   * With `recycleAfterWrites`: the replacement waits for at least this
   * fraction of the relationships held (as of the last fill) in writes, so a
   * fill's cost (proportional to what is held) is spread over as many
   * writes, and the history kept stays proportional to what is held. Default 0.
   */
  recycleFraction?: number;
}

/** What the engine replacements did so far (`recycleAfterWrites`). */
export interface RecycleStats {
  /** Replacements completed. */
  recycles: number;
  /** Writes the current engine answered, and how many it may answer before it is replaced. */
  writes: number;
  threshold: number;
  /** Relationships the current engine was filled with (at start or by the last replacement). */
  relationshipsFilled: number;
  /** Of the last replacement: changes applied to the fresh engine while writes went on, and while they waited. */
  lastCaughtUp: number;
  lastAppliedInPause: number;
  /** The longest time writes waited for a replacement, in ms (for reports; tests assert the counts). */
  longestPauseMs: number;
}

export interface RunningSpiceDBLocal {
  port: number;
  endpoint: string;
  /** Most unary engine calls that ran at once so far. */
  peakConcurrentEngineCalls(): number;
  /** With a data directory: waits until every committed change is stored. */
  persistence?: Pick<Persistence, "sync">;
  /** How many times the engine was replaced by a fresh one (`recycleAfterWrites`). */
  recycles(): number;
  /** The replacements' counts (`recycleAfterWrites`). */
  recycleStats(): RecycleStats;
  /** Stops taking calls, then (with a data directory) stores every committed change before it returns. */
  close(): Promise<void>;
}

const identity = (b: Buffer) => b;

interface MethodInfo {
  name: string;
  serverStreaming?: boolean;
  clientStreaming?: boolean;
}

const SERVICES: { name: string; methods: readonly MethodInfo[] }[] = [
  v1.PermissionsService,
  v1.SchemaService,
  v1.WatchService,
  v1.ExperimentalService,
].map((service) => ({ name: service.typeName, methods: service.methods }));

/**
 * A local SpiceDB server: the standard `authzed.api.v1` gRPC API on TCP,
 * answered by SpiceDB's own engine in this process. Unary methods the engine
 * exports run through FFI on worker threads; streaming methods are relayed,
 * byte for byte, to the engine's own streaming socket. Messages are never
 * decoded here, so every client of the real API (authzed-node, zed) works
 * unchanged. The engine's data lives in memory; with `dataDir`, it is
 * restored from there before the port is bound, and a write is answered only
 * once it is stored there.
 */
export async function startSpiceDBLocal(options: SpiceDBLocalOptions): Promise<RunningSpiceDBLocal> {
  const engine = SpiceDBEngine.start(
    options.metricsPort === undefined
      ? {}
      : { metrics_enabled: true, metrics_port: options.metricsPort, metrics_host: options.host },
  );
  const streaming = streamingClientOf(engine);
  /** The engine serving now, and its streaming socket's client (both replaced by a recycle). */
  const current: Current = {
    engine,
    streaming,
    writes: 0,
    recycles: 0,
    filled: 0,
    lastCaughtUp: 0,
    lastAppliedInPause: 0,
    longestPauseMs: 0,
  };
  const expectedAuth = Buffer.from(`Bearer ${options.presharedKey}`);

  const authorized = (metadata: grpc.Metadata): boolean => {
    const value = metadata.get("authorization")[0];
    if (typeof value !== "string") return false;
    const presented = Buffer.from(value);
    return presented.length === expectedAuth.length && timingSafeEqual(presented, expectedAuth);
  };
  const unauthenticated = {
    code: grpc.status.UNAUTHENTICATED,
    details: "invalid preshared key: invalid token",
  };

  const server = new grpc.Server({ "grpc.max_receive_message_length": 64 * 1024 * 1024 });
  for (const service of SERVICES) {
    const definition: Record<string, grpc.MethodDefinition<Buffer, Buffer>> = {};
    const implementation: grpc.UntypedServiceImplementation = {};
    for (const method of service.methods) {
      const path = `/${service.name}/${method.name}`;
      definition[method.name] = {
        path,
        requestStream: Boolean(method.clientStreaming),
        responseStream: Boolean(method.serverStreaming),
        requestSerialize: identity,
        requestDeserialize: identity,
        responseSerialize: identity,
        responseDeserialize: identity,
      };
      implementation[method.name] = handlerFor(path, method, {
        current,
        authorized,
        unauthenticated,
        observe: options.observe,
        persistence: () => persistence,
        written: () => {
          if (++current.writes >= threshold() && recycleAfter > 0 && !current.recycling) recycle();
        },
      });
    }
    server.addService(definition, implementation);
  }
  addHealthService(
    server,
    SERVICES.map((s) => s.name),
  );

  let persistence: Persistence | undefined;
  // Recycling needs the data directory to restore from, and one engine at a time with metrics on.
  const recycleAfter =
    options.dataDir && options.metricsPort === undefined ? (options.recycleAfterWrites ?? 0) : 0;
  /** Writes after which the engine is replaced: the floor, or the set fraction of what it was filled with. */
  const threshold = () => Math.max(recycleAfter, Math.ceil(current.filled * (options.recycleFraction ?? 0)));
  /**
   * Replaces the engine by a fresh one holding the same relationships. The
   * stored ones are written into it while the old engine goes on serving,
   * every change stored meanwhile collected, and the collected changes are
   * applied to it, round after round, while writes go on, until few are
   * left; then writes wait while the old store catches up and closes, the
   * last few changes are applied and the fresh engine's store opens (no
   * replay): a pause as long as the changes of the last round take to apply,
   * not those of the whole fill. The old engine goes once its calls in flight
   * had time to end. ZedTokens of the old engine then ask the new one for
   * full consistency, as after a restart.
   */
  const recycle = () => {
    const old = { engine: current.engine, streaming: current.streaming, persistence: persistence! };
    let release: () => void = () => {};
    const ready = (async () => {
      const started = performance.now();
      let fresh: SpiceDBEngine;
      try {
        // On a worker thread, like its disposal: reads and writes go on meanwhile.
        fresh = await SpiceDBEngine.startAsync({});
      } catch (err) {
        options.logger?.error({ err: (err as Error).message }, "the engine could not be replaced");
        current.recycling = undefined;
        return;
      }
      const freshStreaming = streamingClientOf(fresh);
      const changes: v1.RelationshipUpdate[] = [];
      try {
        const { schemaText } = v1.ReadSchemaResponse.fromBinary(
          await old.engine.call(
            "/authzed.api.v1.SchemaService/ReadSchema",
            v1.ReadSchemaRequest.toBinary(v1.ReadSchemaRequest.create({})),
          ),
        );
        await fresh.call(
          "/authzed.api.v1.SchemaService/WriteSchema",
          v1.WriteSchemaRequest.toBinary(v1.WriteSchemaRequest.create({ schema: schemaText })),
        );
        old.persistence.tap = (updates) => changes.push(...updates);
        const filled = await old.persistence.replayInto(fresh);
        await options.persistenceHooks?.afterReplayInto?.();
        // Catch up while writes go on: each round applies what the one before let accumulate.
        let caughtUp = 0;
        for (let round = 0; round < CATCH_UP_ROUNDS && changes.length > CATCH_UP_LEFT; round++) {
          const batch = changes.splice(0);
          await applyChanges(fresh, batch);
          caughtUp += batch.length;
        }
        // From here writes wait (set before anything else is awaited).
        current.gate = new Promise<void>((resolve) => {
          release = resolve;
        });
        const paused = performance.now();
        const { store, caughtUp: stored } = await old.persistence.detach();
        old.persistence.tap = undefined;
        if (!stored || old.persistence.failure) {
          store.close();
          throw old.persistence.failure ?? new Error("the old engine's changes could not all be stored");
        }
        const inPause = changes.length;
        await applyChanges(fresh, changes);
        persistence = await Persistence.open(fresh, freshStreaming, {
          dir: options.dataDir!,
          log: options.logger ?? silent,
          hooks: options.persistenceHooks,
          restored: true,
          store,
        });
        current.engine = fresh;
        current.streaming = freshStreaming;
        current.writes = 0;
        current.recycles++;
        current.filled = filled;
        current.lastCaughtUp = caughtUp;
        current.lastAppliedInPause = inPause;
        const pauseMs = performance.now() - paused;
        current.longestPauseMs = Math.max(current.longestPauseMs, pauseMs);
        options.logger?.info(
          {
            ms: Math.round(performance.now() - started),
            writesPausedMs: Math.round(pauseMs),
            relationships: filled,
            changesCaughtUp: caughtUp,
            changesInPause: inPause,
            recycles: current.recycles,
            nextAfterWrites: threshold(),
          },
          "engine replaced by a fresh one restored from the data directory (its memory had grown with every write)",
        );
        setTimeout(() => {
          old.streaming.close();
          old.engine.disposeAsync().catch((err: Error) => {
            options.logger?.warn({ err: err.message }, "a replaced engine did not shut down cleanly");
          });
        }, OLD_ENGINE_GRACE_MS).unref();
      } catch (err) {
        old.persistence.tap = undefined;
        freshStreaming.close();
        void fresh.disposeAsync().catch(() => {});
        // If the old store was closed, writes must be refused: nothing would store them.
        if (current.gate)
          current.failure = new EngineError(
            grpc.status.UNAVAILABLE,
            `writes are refused: the engine could not be replaced (${(err as Error).message})`,
          );
        options.logger?.error({ err: (err as Error).message }, "the engine could not be replaced");
      } finally {
        current.gate = undefined;
        current.recycling = undefined;
        release();
      }
    })();
    current.recycling = ready;
  };
  try {
    if (options.schemaFile) {
      const schema = await readFile(options.schemaFile, "utf8");
      await engine.call(
        "/authzed.api.v1.SchemaService/WriteSchema",
        v1.WriteSchemaRequest.toBinary(v1.WriteSchemaRequest.create({ schema })),
      );
      options.logger?.info({ schemaFile: options.schemaFile }, "schema loaded");
    }
    if (options.dataDir) {
      persistence = await Persistence.open(engine, streaming, {
        dir: options.dataDir,
        log: options.logger ?? silent,
        progressEveryMs: options.replayProgressEveryMs,
        hooks: options.persistenceHooks,
      });
      current.filled = persistence.restoredCount;
    }
  } catch (err) {
    streaming.close();
    engine.dispose();
    throw err;
  }

  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync(
      `${options.host}:${options.port}`,
      grpc.ServerCredentials.createInsecure(),
      (err, bound) => (err ? reject(err) : resolve(bound)),
    ),
  );
  options.logger?.info(
    { endpoint: `${options.host}:${port}`, dataDir: options.dataDir ?? null },
    options.dataDir
      ? "SpiceDB (local) listening; its relationships are kept in the data directory"
      : "SpiceDB (local) listening; its data is in memory and is lost when it stops",
  );

  return {
    port,
    endpoint: `${options.host}:${port}`,
    peakConcurrentEngineCalls: () => current.engine.peakInFlight,
    ...(persistence ? { persistence: { sync: () => persistence!.sync() } } : {}),
    recycles: () => current.recycles,
    recycleStats: () => ({
      recycles: current.recycles,
      writes: current.writes,
      threshold: recycleAfter > 0 ? threshold() : 0,
      relationshipsFilled: current.filled,
      lastCaughtUp: current.lastCaughtUp,
      lastAppliedInPause: current.lastAppliedInPause,
      longestPauseMs: current.longestPauseMs,
    }),
    async close() {
      await new Promise<void>((resolve) => {
        const timer = setTimeout(() => {
          server.forceShutdown();
          resolve();
        }, 2_000);
        server.tryShutdown(() => {
          clearTimeout(timer);
          resolve();
        });
      });
      await current.recycling;
      await persistence?.close();
      current.streaming.close();
      await new Promise((r) => setTimeout(r, 10));
      current.engine.dispose();
    },
  };
}

/**
 * How long a replaced engine stays, for the calls still in flight on it (the service's SpiceDB deadline is
 * 2 s; reads cut short are retried on UNAVAILABLE). Longer keeps several old engines' memory at once.
 */
const OLD_ENGINE_GRACE_MS = 5_000;
/** A replacement catches up in rounds while writes go on until at most this many changes are left for the pause... */
const CATCH_UP_LEFT = 50;
/** ...or this many rounds have run (writes arriving faster than a round applies them). */
const CATCH_UP_ROUNDS = 8;

interface Current {
  engine: SpiceDBEngine;
  streaming: grpc.Client;
  /** Writes answered by this engine. */
  writes: number;
  recycles: number;
  /** Relationships this engine was filled with. */
  filled: number;
  lastCaughtUp: number;
  lastAppliedInPause: number;
  longestPauseMs: number;
  /** While a replacement catches up: writes wait for it. */
  gate?: Promise<void> | undefined;
  /** While a replacement runs (the fresh engine is filled, then catches up). */
  recycling?: Promise<void> | undefined;
  /** Set when a replacement failed: writes are refused. */
  failure?: EngineError;
}

/**
 * A client of the engine's streaming socket, on its own subchannel, so
 * closing this client really closes the connection; the engine's shutdown
 * otherwise waits seconds for it to go away.
 */
function streamingClientOf(engine: SpiceDBEngine): grpc.Client {
  return new grpc.Client(engine.streamingTarget, grpc.credentials.createInsecure(), {
    "grpc.use_local_subchannel_pool": 1,
  });
}

interface HandlerContext {
  current: Current;
  /** Called after each write the engine answered. */
  written: () => void;
  authorized: (metadata: grpc.Metadata) => boolean;
  unauthenticated: Partial<grpc.StatusObject>;
  observe: ((path: string, request: Buffer) => void) | undefined;
  /** With a data directory: where a write must be stored before it is answered. */
  persistence: () => Persistence | undefined;
}

/** The revision a write committed at, from its serialized response (both carry a ZedToken in field 1). */
const COMMITTED_AT: Partial<Record<string, (response: Buffer) => string | undefined>> = {
  "/authzed.api.v1.PermissionsService/WriteRelationships": (r) =>
    v1.WriteRelationshipsResponse.fromBinary(r).writtenAt?.token,
  "/authzed.api.v1.PermissionsService/DeleteRelationships": (r) =>
    v1.DeleteRelationshipsResponse.fromBinary(r).deletedAt?.token,
};

const silent: Log = { info() {}, warn() {}, error() {} };

function toStatus(err: unknown): Partial<grpc.StatusObject> {
  if (err instanceof EngineError) return { code: err.code, details: err.message };
  const e = err as { code?: number; details?: string; message?: string };
  if (typeof e.code === "number") return { code: e.code, details: e.details ?? e.message ?? "" };
  return { code: grpc.status.INTERNAL, details: e.message ?? String(err) };
}

/** What the relayed call carries over: the caller's deadline. Credentials stay here. */
function relayOptions(call: Pick<grpc.ServerUnaryCall<Buffer, Buffer>, "getDeadline">): grpc.CallOptions {
  const deadline = call.getDeadline();
  return deadline instanceof Date || (typeof deadline === "number" && Number.isFinite(deadline))
    ? { deadline }
    : {};
}

function handlerFor(path: string, method: MethodInfo, ctx: HandlerContext): grpc.UntypedHandleCall {
  if (!method.serverStreaming && !method.clientStreaming) {
    return (call: grpc.ServerUnaryCall<Buffer, Buffer>, callback: grpc.sendUnaryData<Buffer>) => {
      if (!ctx.authorized(call.metadata)) return callback(ctx.unauthenticated);
      ctx.observe?.(path, call.request);
      const write = isWriteMethod(path);
      if (path in FFI_METHODS) {
        // Up to the engine call, synchronous: a write either is queued on the engine before a
        // replacement starts (and stored by it), or waits for the replacement and goes to the new one.
        const run = async () => {
          const persistence = ctx.persistence();
          const refused = write ? (ctx.current.failure ?? persistence?.failure) : undefined;
          if (refused) throw refused;
          const committedAt = persistence && COMMITTED_AT[path];
          const response = await ctx.current.engine.call(path as FfiMethodPath, call.request);
          const token = committedAt?.(response);
          if (token) await persistence!.stored(token);
          if (write) ctx.written();
          return response;
        };
        const gate = write ? ctx.current.gate : undefined;
        (gate ? gate.then(run) : run()).then(
          (response) => callback(null, response),
          (err) => callback(toStatus(err)),
        );
        return;
      }
      callback({
        code: grpc.status.UNIMPLEMENTED,
        details: `${path} is not served by the local SpiceDB engine`,
      });
    };
  }
  if (method.serverStreaming && !method.clientStreaming) {
    return (call: grpc.ServerWritableStream<Buffer, Buffer>) => {
      if (!ctx.authorized(call.metadata)) {
        call.emit("error", ctx.unauthenticated);
        return;
      }
      ctx.observe?.(path, call.request);
      const upstream = ctx.current.streaming.makeServerStreamRequest(
        path,
        identity,
        identity,
        call.request,
        new grpc.Metadata(),
        relayOptions(call),
      );
      upstream.on("data", (chunk: Buffer) => {
        // Respect the client's flow control: pause the engine while our client catches up.
        if (!call.write(chunk)) {
          upstream.pause();
          call.once("drain", () => upstream.resume());
        }
      });
      upstream.on("end", () => call.end());
      upstream.on("error", (err) => {
        if ((err as grpc.ServiceError).code !== grpc.status.CANCELLED || !call.cancelled)
          call.emit("error", toStatus(err));
      });
      call.on("cancelled", () => upstream.cancel());
    };
  }
  if (method.clientStreaming && !method.serverStreaming) {
    return (call: grpc.ServerReadableStream<Buffer, Buffer>, callback: grpc.sendUnaryData<Buffer>) => {
      if (!ctx.authorized(call.metadata)) return callback(ctx.unauthenticated);
      const upstream = ctx.current.streaming.makeClientStreamRequest(
        path,
        identity,
        identity,
        new grpc.Metadata(),
        relayOptions(call),
        (err, response) => {
          if (err) return callback(toStatus(err));
          // A streamed write (a bulk import) carries no ZedToken: wait for everything committed so far.
          const persistence = ctx.persistence();
          if (!persistence) return callback(null, response);
          persistence.sync().then(
            () => callback(null, response),
            (failure) => callback(toStatus(failure)),
          );
        },
      );
      call.on("data", (chunk: Buffer) => upstream.write(chunk));
      call.on("end", () => upstream.end());
      call.on("cancelled", () => upstream.cancel());
    };
  }
  return (call: grpc.ServerDuplexStream<Buffer, Buffer>) => {
    call.emit("error", {
      code: grpc.status.UNIMPLEMENTED,
      details: `${path} is not served by the local SpiceDB engine`,
    });
  };
}
