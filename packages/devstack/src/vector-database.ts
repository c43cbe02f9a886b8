/**
 * The local vector database: PGlite (PostgreSQL 17 compiled to WebAssembly)
 * with pgvector's own code (its `vector` extension, 0.8.0), served over
 * PostgreSQL's wire protocol on 127.0.0.1, so the service reaches it with
 * `pg` and the same SQL as a production PostgreSQL with pgvector
 * (docs/adr/0020-vector-engine.md). For `pnpm start` (data under
 * `$DATA_DIR/vectors`) and the tests (in memory); never for production.
 *
 * A session is PGlite's single backend, driven by `@electric-sql/pglite-socket`'s
 * `PGLiteSocketHandler`, which holds PGlite for one client connection at a
 * time. Two things of that version are made good here:
 * - it hands each TCP read to PGlite as it comes, and a message split across
 *   reads (any over 64 KiB: a batch of vectors) aborts PGlite's WebAssembly
 *   ("RuntimeError: unreachable"). The handler is given whole messages,
 *   up to the end of a query (Sync, Query, Flush), never part of one;
 * - a client gone mid-transaction would leave its transaction open for the
 *   next one, who would commit it. Between clients the session is rolled
 *   back and reset (`ROLLBACK`, `DISCARD ALL`).
 * PGlite ignores the settings of a client's startup message (`statement_timeout`
 * among them): only the client's own deadline on an answer applies here.
 * Connections beyond the one being served wait their turn in order, so a
 * client pool must hold one connection at a time (VECTOR_DATABASE_MAX_CONNECTIONS=1)
 * and give it back when idle.
 */
import { createServer, type Server, type Socket } from "node:net";
import { Duplex } from "node:stream";
import { PGlite } from "@electric-sql/pglite";
import { vector } from "@electric-sql/pglite/vector";
import { PGLiteSocketHandler } from "@electric-sql/pglite-socket";

/** Role and database in the local vector database's URL (PGlite has one of each; it accepts any name). */
export const LOCAL_VECTOR_DATABASE_USER = "postgres";

export interface VectorDatabaseOptions {
  /** TCP port on 127.0.0.1; 0: one the kernel picks (see `port` of the result). */
  port: number;
  /** PGlite's data directory (created on first start); unset: in memory, gone when it stops. */
  dataDir?: string;
  /** Called with what goes wrong with a client connection (it is closed). */
  onError?: (err: Error) => void;
}

export interface RunningVectorDatabase {
  port: number;
  /** `postgres://postgres@127.0.0.1:<port>/postgres`: what VECTOR_DATABASE_URL says to reach it. */
  url: string;
  /** Connections waiting for the one being served to close. */
  waiting(): number;
  /** Closes every connection, then PGlite (its data directory is left consistent). */
  stop(): Promise<void>;
}

/** `postgres://postgres@127.0.0.1:<port>/postgres`. */
export function vectorDatabaseUrl(port: number): string {
  return `postgres://${LOCAL_VECTOR_DATABASE_USER}@127.0.0.1:${port}/${LOCAL_VECTOR_DATABASE_USER}`;
}

/** The frontend's untyped first messages (protocol 3.0), by their request code. */
const SSL_REQUEST = 80_877_103;
const GSSENC_REQUEST = 80_877_104;
const CANCEL_REQUEST = 80_877_102;
/** Larger messages end the connection: the vectors of one statement are far below it. */
const MAX_MESSAGE_BYTES = 256 * 1024 * 1024;
/** Extended-protocol messages whose answer waits for a Sync or Flush; everything else is passed on at once. */
const HELD_UNTIL_SYNC = new Set(["P", "B", "D", "E", "C"].map((c) => c.charCodeAt(0)));
const TERMINATE = "X".charCodeAt(0);

/**
 * Cuts a client's byte stream into whole frontend messages and hands them on
 * in batches that end where a client waits for an answer. Answers SSL and
 * GSSAPI encryption requests with "N" (loopback only: no encryption), ends the
 * connection on a cancel request (PGlite has no second backend to cancel from)
 * and swallows Terminate (the socket closing says it).
 */
class MessageFramer {
  private buffer: Buffer = Buffer.alloc(0);
  private started = false;
  private held: Buffer[] = [];
  private readonly socket: Socket;
  private readonly deliver: (batch: Buffer) => void;

  constructor(socket: Socket, deliver: (batch: Buffer) => void) {
    this.socket = socket;
    this.deliver = deliver;
  }

  push(data: Buffer): void {
    this.buffer = this.buffer.length === 0 ? data : Buffer.concat([this.buffer, data]);
    for (;;) {
      const headerBytes = this.started ? 5 : 4;
      if (this.buffer.length < headerBytes) return;
      const length = this.buffer.readInt32BE(this.started ? 1 : 0);
      if (length < 4 || length > MAX_MESSAGE_BYTES) {
        this.socket.destroy(new Error(`a message of ${length} bytes`));
        return;
      }
      const total = length + (this.started ? 1 : 0);
      if (this.buffer.length < total) return;
      const message = this.buffer.subarray(0, total);
      this.buffer = this.buffer.subarray(total);
      if (this.started) this.typed(message);
      else this.untyped(message);
    }
  }

  private untyped(message: Buffer): void {
    const code = message.length >= 8 ? message.readInt32BE(4) : 0;
    if (code === SSL_REQUEST || code === GSSENC_REQUEST) {
      this.socket.write("N");
      return;
    }
    if (code === CANCEL_REQUEST) {
      this.socket.end();
      return;
    }
    this.started = true;
    this.deliver(Buffer.from(message));
  }

  private typed(message: Buffer): void {
    const type = message[0]!;
    if (type === TERMINATE) {
      this.socket.end();
      return;
    }
    this.held.push(Buffer.from(message));
    if (HELD_UNTIL_SYNC.has(type)) return;
    const batch = Buffer.concat(this.held);
    this.held = [];
    this.deliver(batch);
  }
}

/**
 * What `PGLiteSocketHandler` is attached to instead of the client's socket:
 * each read is one batch of whole messages, and writes go to the socket.
 */
class FramedConnection extends Duplex {
  private readonly socket: Socket;

  constructor(socket: Socket) {
    super({ readableObjectMode: true });
    this.socket = socket;
    socket.once("close", () => this.destroy());
    socket.on("error", () => this.destroy());
  }

  override _read(): void {}

  override _write(chunk: Buffer, _encoding: BufferEncoding, callback: (err?: Error | null) => void): void {
    if (this.socket.destroyed) callback();
    else this.socket.write(chunk, callback);
  }

  override _final(callback: () => void): void {
    this.socket.end();
    callback();
  }

  override _destroy(err: Error | null, callback: (err?: Error | null) => void): void {
    this.socket.destroy();
    callback(err);
  }
}

/** PGlite with pgvector, in this process, served on 127.0.0.1:`port`. */
export async function startVectorDatabase(options: VectorDatabaseOptions): Promise<RunningVectorDatabase> {
  const db = await PGlite.create({
    ...(options.dataDir ? { dataDir: options.dataDir } : {}),
    extensions: { vector },
  });
  // PGlite sets its search path in the session (DISCARD ALL would lose it), and turns sequential scans off
  // on its command line: the planner here is to choose as a PostgreSQL server's does.
  const searchPath = (await db.query<{ path: string }>("SELECT current_setting('search_path') AS path")).rows[0]!
    .path;
  const resetSession = async () => {
    // Each its own statement: DISCARD ALL cannot run in the implicit transaction of a multi-statement string.
    await db.exec("ROLLBACK");
    await db.exec("DISCARD ALL");
    await db.query("SELECT set_config('search_path', $1, false), set_config('enable_seqscan', 'on', false)", [
      searchPath,
    ]);
  };
  await resetSession();
  const queue: FramedConnection[] = [];
  let serving: FramedConnection | undefined;
  let stopping = false;
  /** The reset after the last client, while it runs. */
  let resetting: Promise<void> = Promise.resolve();
  const sockets = new Set<Socket>();

  /** Serves the next waiting connection, once the session is clean. */
  const next = async (): Promise<void> => {
    while (!serving && !stopping) {
      const connection = queue.shift();
      if (!connection) return;
      if (connection.destroyed) continue;
      serving = connection;
      const handler = new PGLiteSocketHandler({ db, closeOnDetach: true });
      handler.addEventListener("close", () => void ended(connection));
      handler.addEventListener("error", (event) =>
        options.onError?.((event as CustomEvent<Error>).detail ?? new Error("connection error")),
      );
      try {
        // The handler reads `data`, `error` and `close`, writes answers and ends the connection: a Duplex does all of it.
        await handler.attach(connection as unknown as Socket);
      } catch (err) {
        options.onError?.(err as Error);
        connection.destroy();
        await ended(connection);
        return;
      }
      // Closed before the handler listened: its `close` will not come.
      if (connection.destroyed) handler.detach(true);
    }
  };

  /** The served connection is gone: nothing it left open passes to the next one. */
  const ended = (connection: FramedConnection): Promise<void> => {
    if (serving !== connection) return Promise.resolve();
    resetting = (async () => {
      try {
        if (!stopping) await resetSession();
      } catch (err) {
        options.onError?.(err as Error);
      }
      serving = undefined;
    })();
    return resetting.then(next);
  };

  const server: Server = createServer((socket) => {
    if (stopping) return void socket.destroy();
    sockets.add(socket);
    socket.once("close", () => sockets.delete(socket));
    socket.setNoDelay(true);
    const connection = new FramedConnection(socket);
    const framer = new MessageFramer(socket, (batch) => connection.push(batch));
    socket.on("data", (data: Buffer) => framer.push(data));
    socket.on("error", (err) => options.onError?.(err));
    queue.push(connection);
    void next();
  });
  const port = await new Promise<number>((resolve, reject) => {
    server.once("error", reject);
    server.listen({ port: options.port, host: "127.0.0.1", exclusive: true }, () => {
      server.off("error", reject);
      const address = server.address();
      resolve(typeof address === "object" && address ? address.port : options.port);
    });
  }).catch(async (err: Error) => {
    await db.close();
    throw err;
  });

  return {
    port,
    url: vectorDatabaseUrl(port),
    waiting: () => queue.length,
    async stop() {
      if (stopping) return;
      stopping = true;
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      for (const socket of sockets) socket.destroy();
      await closed;
      await resetting;
      // The last client's transaction, if any, is not committed by the close.
      await db.exec("ROLLBACK").catch(() => {});
      await db.close();
    },
  };
}
