/**
 * The local vector database: PGlite (PostgreSQL 17 compiled to WebAssembly)
 * with pgvector's own code (its `vector` extension, 0.8.0), served over
 * PostgreSQL's wire protocol on 127.0.0.1, so the service reaches it with
 * `pg` and the same SQL as a production PostgreSQL with pgvector
 * (docs/adr/0020-vector-engine.md). For `pnpm start` (data under
 * `$DATA_DIR/vectors`) and the tests (in memory); never for production.
 *
 * PGlite has one backend, so one session. Many client connections share it
 * (not one at a time, as `@electric-sql/pglite-socket`'s handler does: a pool
 * that kept an idle connection would then stall every other client):
 * - each client's byte stream is cut into whole messages and handed to
 *   PGlite up to the end of a query (Sync, Query, Flush), never part of one
 *   (a message split across TCP reads, any over 64 KiB, aborts PGlite's
 *   WebAssembly: "RuntimeError: unreachable");
 * - queries of all connections run one at a time, in the order they came,
 *   except that a connection whose last answer left the session in a
 *   transaction (or mid extended query) holds it: only its queries run until
 *   its transaction ends. So transactions are as isolated as on a server,
 *   one after another;
 * - a client gone mid-transaction has it rolled back, and once no client is
 *   left the session is reset (`DISCARD ALL`).
 * What lives in a session beyond a transaction is shared by every connection:
 * settings made with `SET` (use `SET LOCAL` / `set_config(..., true)`),
 * session-level advisory locks (so two connections never exclude each other
 * with them: `pnpm start` and the tests apply the vector migrations before
 * any other client connects), named prepared statements. PGlite ignores the
 * settings of a client's startup message (`statement_timeout` among them):
 * only the client's own deadline on an answer applies here.
 */
import { randomBytes } from "node:crypto";
import { existsSync } from "node:fs";
import { cp, mkdir, readFile, rename, rm, writeFile } from "node:fs/promises";
import { createServer, type Server, type Socket } from "node:net";
import { dirname, join } from "node:path";
import { PGlite } from "@electric-sql/pglite";
import { vector } from "@electric-sql/pglite/vector";
import { madeOnce } from "./made-once.ts";

/** Role and database in the local vector database's URL (PGlite has one of each; it accepts any name). */
export const LOCAL_VECTOR_DATABASE_USER = "postgres";

export interface VectorDatabaseOptions {
  /** TCP port on 127.0.0.1; 0: one the kernel picks (see `port` of the result). */
  port: number;
  /** PGlite's data directory (created on first start); unset: in memory, gone when it stops. */
  dataDir?: string;
  /** A dump of a new cluster (PGlite's `dumpDataDir`) that a new database starts from (in memory, or a data directory with no cluster yet), made there first if missing (initdb takes seconds, loading it one). */
  templateFile?: string;
  /** Called with what goes wrong with a client connection (it is closed). */
  onError?: (err: Error) => void;
  /** Called when PGlite itself failed (its WebAssembly aborted): it serves no more, and the process should end. */
  onFatal?: (err: Error) => void;
}

export interface RunningVectorDatabase {
  port: number;
  /** `postgres://postgres@127.0.0.1:<port>/postgres`: what VECTOR_DATABASE_URL says to reach it. */
  url: string;
  /** Client connections open. */
  connections(): number;
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

/** `Sync`: ends whatever extended query a client gone midway left. */
const SYNC = Buffer.from([0x53, 0, 0, 0, 4]);
const READY_FOR_QUERY = "Z".charCodeAt(0);
const IDLE = "I".charCodeAt(0);

/** The bytes PGlite's backend reads from its input at a time. */
const BACKEND_READ_BYTES = 8192;

/**
 * Runs a batch of a client's messages, whole. PGlite's backend reads its input
 * `BACKEND_READ_BYTES` at a time, and when a message ends exactly where a read
 * ended it stops there, dropping the rest of the input: a batch whose Describe
 * ended at byte 32,768 was answered up to it, without its Execute's and Sync's
 * answers, and its client waited forever (the vector-search benchmark's writes
 * hung so). So the batch is handed on in parts that end at such a place, each
 * part's answer following the one before.
 *
 * PGlite answers in a view of a buffer it writes its next answer into (1 MiB,
 * reused): what is returned is a copy, so that neither the next part nor the
 * next batch overwrites an answer a socket has not sent yet.
 */
async function execBatch(db: PGlite, batch: Buffer): Promise<Buffer> {
  const answers: Buffer[] = [];
  let start = 0;
  for (let at = 0; at + 5 <= batch.length; ) {
    at += 1 + batch.readInt32BE(at + 1);
    if (at < batch.length && (at - start) % BACKEND_READ_BYTES === 0) {
      answers.push(Buffer.from(await db.execProtocolRaw(batch.subarray(start, at), { syncToFs: false })));
      start = at;
    }
  }
  answers.push(Buffer.from(await db.execProtocolRaw(start === 0 ? batch : batch.subarray(start))));
  return answers.length === 1 ? answers[0]! : Buffer.concat(answers);
}

/**
 * Whether PGlite's answer leaves the session free for another connection: its
 * last message is ReadyForQuery with status idle (not in a transaction, not in
 * a failed one). An answer without ReadyForQuery (a Flush, a COPY under way)
 * leaves it to the same connection.
 */
function leavesSessionIdle(view: Buffer): boolean {
  let status: number | undefined;
  for (let at = 0; at + 5 <= view.length; ) {
    const type = view[at]!;
    const length = view.readInt32BE(at + 1);
    if (length < 4) return false;
    if (type === READY_FOR_QUERY && length === 5 && at + 6 <= view.length) status = view[at + 5];
    at += 1 + length;
  }
  return status === IDLE;
}

/**
 * PGlite in memory, or on its data directory. A new one (in memory, or a data directory with no
 * cluster yet) starts from the template when there is one, and makes it first when it is missing:
 * initdb in WebAssembly is seconds of CPU, loading the dump under one. A new data directory is a
 * copy of the template's data directory form (`templateDirectoryOf`), which PGlite opens as it
 * would its own from a previous start (loading the dump writes every file through PGlite's file
 * system, several times the CPU of a copy).
 */
async function openPGlite(options: VectorDatabaseOptions): Promise<PGlite> {
  const extensions = { vector };
  const where = options.dataDir ? { dataDir: options.dataDir } : {};
  const fresh = !options.dataDir || !hasCluster(options.dataDir);
  // PGlite makes the data directory itself, but not its parents.
  if (options.dataDir) await mkdir(dirname(options.dataDir), { recursive: true });
  if (!fresh || !options.templateFile) return PGlite.create({ ...where, extensions });
  if (options.dataDir && (await copyTemplateDirectory(options.templateFile, options.dataDir))) {
    return PGlite.create({ ...where, extensions });
  }
  const templateFile = options.templateFile;
  const fromTemplate = async () => {
    const template = await readFile(templateFile).catch(() => undefined);
    return template && PGlite.create({ ...where, loadDataDir: new Blob([template]), extensions });
  };
  // Missing: one process makes it, the others that start meanwhile (a fresh machine's first test
  // files, at once) wait for it and load it instead of each making their own.
  return madeOnce(
    `${templateFile}.lock`,
    fromTemplate,
    async () => {
      const db = await PGlite.create({ ...where, extensions });
      const dump = Buffer.from(await (await db.dumpDataDir("none")).arrayBuffer());
      await putInPlace(templateFile, (partial) => writeFile(partial, dump));
      return db;
    },
    TEMPLATE_MAKING_MS,
  );
}

/** How long making the template may take (initdb in WebAssembly on a loaded machine, and its dump). */
const TEMPLATE_MAKING_MS = 120_000;

/** Whether `dir` holds a PostgreSQL cluster. */
const hasCluster = (dir: string) => existsSync(join(dir, "PG_VERSION"));

/**
 * Makes `target` under another name and renames it into place, so that no one ever reads part of
 * one; when that fails (another process put its own there first, or it could not be made), what
 * was made is removed.
 */
async function putInPlace(target: string, make: (partial: string) => Promise<void>): Promise<void> {
  const partial = `${target}.${randomBytes(6).toString("hex")}.partial`;
  try {
    await make(partial);
    await rename(partial, target);
  } catch {
    await rm(partial, { recursive: true, force: true });
  }
}

/** The template as a data directory, beside the dump it is made from (`<dump>.data`). */
export const templateDirectoryOf = (templateFile: string) => `${templateFile}.data`;

/**
 * Copies the template's data directory to `dataDir`, making it from the dump first if missing
 * (in a directory of its own, renamed into place once PGlite has closed it). False when there is
 * no dump yet (the caller makes it) or the directory could not be made.
 */
async function copyTemplateDirectory(templateFile: string, dataDir: string): Promise<boolean> {
  const directory = templateDirectoryOf(templateFile);
  if (!hasCluster(directory)) {
    const dump = await readFile(templateFile).catch(() => undefined);
    if (!dump) return false;
    await putInPlace(directory, async (partial) => {
      const db = await PGlite.create({
        dataDir: partial,
        loadDataDir: new Blob([dump]),
        extensions: { vector },
      });
      await db.close();
    });
    if (!hasCluster(directory)) return false;
  }
  await cp(directory, dataDir, { recursive: true });
  return true;
}

interface Client {
  socket: Socket;
  closed: boolean;
}

/** A batch of a client's messages to run, or what its going away leaves to do. */
type Work = { client: Client; batch: Buffer } | { client: Client; gone: true };

/** PGlite with pgvector, in this process, served on 127.0.0.1:`port`. */
export async function startVectorDatabase(options: VectorDatabaseOptions): Promise<RunningVectorDatabase> {
  const db = await openPGlite(options);
  // PGlite sets its search path in the session (DISCARD ALL would lose it), turns sequential scans off on its
  // command line, and sends its clients debugging messages (`client_min_messages` debug3: the text of every
  // statement parsed, back with its answer): the planner and the messages here are a PostgreSQL server's.
  const searchPath = (await db.query<{ path: string }>("SELECT current_setting('search_path') AS path"))
    .rows[0]!.path;
  const resetSession = async () => {
    // Each its own statement: DISCARD ALL cannot run in the implicit transaction of a multi-statement string.
    await db.exec("ROLLBACK");
    await db.exec("DISCARD ALL");
    await db.query(
      "SELECT set_config('search_path', $1, false), set_config('enable_seqscan', 'on', false), set_config('client_min_messages', 'notice', false)",
      [searchPath],
    );
  };
  await resetSession();

  const clients = new Set<Client>();
  const work: Work[] = [];
  /** The connection whose transaction holds the session. */
  let holder: Client | undefined;
  let running: Promise<void> | undefined;
  let stopping = false;
  let failed: Error | undefined;

  /** Runs queued work, one at a time: the holder's alone while there is one, else in arrival order. */
  const run = async (): Promise<void> => {
    while (!stopping && !failed) {
      const at = holder ? work.findIndex((item) => item.client === holder) : 0;
      if (at < 0 || work.length === 0) return;
      const item = work.splice(at, 1)[0]!;
      const { client } = item;
      try {
        if ("gone" in item) {
          if (holder === client) {
            holder = undefined;
            await db.execProtocolRaw(SYNC);
            await db.exec("ROLLBACK");
          }
          if (clients.size === 0) await resetSession();
          continue;
        }
        if (client.closed) continue;
        const answer = await execBatch(db, item.batch);
        holder = leavesSessionIdle(answer) ? undefined : client;
        if (answer.length > 0 && !client.socket.destroyed) client.socket.write(answer);
      } catch (err) {
        // PGlite's WebAssembly aborted: nothing it answers from now on can be trusted.
        failed = err as Error;
        for (const other of clients) other.socket.destroy();
        options.onFatal?.(failed);
      }
    }
  };
  const schedule = () => {
    running ??= run().finally(() => {
      running = undefined;
      if (work.length > 0 && !stopping && !failed && (!holder || work.some((item) => item.client === holder)))
        schedule();
    });
  };

  const server: Server = createServer((socket) => {
    if (stopping || failed) return void socket.destroy();
    const client: Client = { socket, closed: false };
    clients.add(client);
    socket.setNoDelay(true);
    const framer = new MessageFramer(socket, (batch) => {
      if (client.closed) return;
      work.push({ client, batch });
      schedule();
    });
    socket.on("data", (data: Buffer) => framer.push(data));
    socket.on("error", (err) => options.onError?.(err));
    socket.once("close", () => {
      client.closed = true;
      clients.delete(client);
      for (let i = work.length - 1; i >= 0; i--) if (work[i]!.client === client) work.splice(i, 1);
      work.push({ client, gone: true });
      schedule();
    });
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
    connections: () => clients.size,
    async stop() {
      if (stopping) return;
      stopping = true;
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      for (const client of clients) client.socket.destroy();
      await closed;
      await running;
      // An open transaction is not committed by the close.
      await db.exec("ROLLBACK").catch(() => {});
      await db.close().catch(() => {});
    },
  };
}
