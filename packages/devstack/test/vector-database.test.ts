import { existsSync } from "node:fs";
import { mkdtemp, rm, stat } from "node:fs/promises";
import { createConnection } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { templateDirectoryOf } from "../src/vector-database.ts";
import {
  type RunningVectorDatabaseProcess,
  startVectorDatabaseProcess,
  vectorDatabaseTemplateFile,
} from "../src/vector-database-process.ts";

/** A client of the database, closed by `end()`; its errors (a connection we cut) are expected. */
async function connect(url: string): Promise<pg.Client> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 30_000 });
  client.on("error", () => {});
  await client.connect();
  return client;
}

/** A vector of `width` numbers as pgvector's text form; `seed` makes each one different. */
const vectorText = (width: number, seed: number) =>
  `[${Array.from({ length: width }, (_, i) => (Math.sin(seed * 31 + i) + 1.5).toFixed(6)).join(",")}]`;

/** Cuts the client's connection without a word (a process killed mid-transaction). */
const cut = (client: pg.Client) =>
  (client as unknown as { connection: { stream: { destroy(): void } } }).connection.stream.destroy();

/** A PostgreSQL frontend message: its type, then its length and body. */
function message(type: string, ...parts: Buffer[]): Buffer {
  const body = Buffer.concat(parts);
  const head = Buffer.alloc(5);
  head.write(type, 0, "latin1");
  head.writeInt32BE(4 + body.length, 1);
  return Buffer.concat([head, body]);
}
const cstring = (text: string) => Buffer.from(`${text}\0`);
const int16 = (n: number) => Buffer.from([n >> 8, n & 255]);
const int32 = (n: number) => {
  const b = Buffer.alloc(4);
  b.writeInt32BE(n);
  return b;
};
const simpleQuery = (sql: string) => message("Q", cstring(sql));
/** Parse, Bind (one text parameter), Describe, Execute and Sync of the unnamed statement, as one batch. */
function extendedQuery(sql: string, parameter: string): Buffer {
  const value = Buffer.from(parameter);
  return Buffer.concat([
    message("P", cstring(""), cstring(sql), int16(0)),
    message("B", cstring(""), cstring(""), int16(0), int16(1), int32(value.length), value, int16(0)),
    message("D", Buffer.from("P"), cstring("")),
    message("E", cstring(""), int32(0)),
    message("S"),
  ]);
}
/** The types of the backend messages in `answer`, notices left out. */
function messageTypes(answer: Buffer): string[] {
  const types: string[] = [];
  for (let at = 0; at + 5 <= answer.length; at += 1 + answer.readInt32BE(at + 1))
    if (answer[at] !== "N".charCodeAt(0)) types.push(String.fromCharCode(answer[at]!));
  return types;
}

/** A connection speaking the wire protocol itself: `ask` sends bytes and reads up to ReadyForQuery. */
async function rawSession(port: number) {
  const socket = createConnection({ port, host: "127.0.0.1" });
  let received = Buffer.alloc(0);
  let waiting: (() => void) | undefined;
  socket.on("data", (data) => {
    received = Buffer.concat([received, data]);
    waiting?.();
  });
  const readyAt = () => {
    for (let at = 0; at + 5 <= received.length; at += 1 + received.readInt32BE(at + 1))
      if (received[at] === "Z".charCodeAt(0) && at + 6 <= received.length) return at + 6;
    return -1;
  };
  const untilReady = () =>
    new Promise<Buffer>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error("no ReadyForQuery in 20 s")), 20_000);
      const check = () => {
        const end = readyAt();
        if (end < 0) return;
        clearTimeout(timer);
        waiting = undefined;
        const answer = received.subarray(0, end);
        received = received.subarray(end);
        resolve(answer);
      };
      waiting = check;
      check();
    });
  await new Promise<void>((resolve, reject) => socket.once("connect", resolve).once("error", reject));
  const params = Buffer.concat([
    cstring("user"),
    cstring("postgres"),
    cstring("database"),
    cstring("postgres"),
    cstring(""),
  ]);
  const startup = Buffer.concat([int32(8 + params.length), int32(196_608), params]);
  socket.write(startup);
  // PGlite asks for an MD5 password (AuthenticationMD5Password) and takes any.
  await new Promise<void>((resolve) => {
    waiting = () => received.length >= 13 && resolve();
    waiting();
  });
  expect([received[0], received.readInt32BE(5)]).toEqual(["R".charCodeAt(0), 5]);
  received = received.subarray(13);
  socket.write(message("p", cstring(`md5${"0".repeat(32)}`)));
  await untilReady();
  return {
    ask(bytes: Buffer) {
      socket.write(bytes);
      return untilReady();
    },
    send: (bytes: Buffer) => socket.write(bytes),
    /** The next answer, up to its ReadyForQuery. */
    answer: untilReady,
    /** Stops reading, so the server's writes to it back up. */
    pause: () => socket.pause(),
    resume: () => socket.resume(),
    close: () => socket.destroy(),
  };
}

describe("the local vector database", () => {
  let database: RunningVectorDatabaseProcess;
  beforeAll(async () => {
    // From the project's template (made once per checkout, as `pnpm start` does): no initdb of its own.
    database = await startVectorDatabaseProcess({
      port: 0,
      env: process.env,
      inMemory: true,
      templateFile: vectorDatabaseTemplateFile(),
    });
    const client = await connect(database.databaseUrl);
    await client.query("CREATE EXTENSION vector");
    await client.query("CREATE TABLE items (id integer PRIMARY KEY, embedding vector(1536))");
    await client.end();
  });
  afterAll(() => database?.stop());

  it("runs pgvector's own code: version 0.8, HNSW with cosine distance and iterative index scans", async () => {
    const client = await connect(database.databaseUrl);
    try {
      const { rows } = await client.query("SELECT extversion FROM pg_extension WHERE extname = 'vector'");
      expect(rows[0].extversion).toBe("0.8.0");
      await client.query("CREATE TABLE small (id integer, embedding vector(3))");
      await client.query("INSERT INTO small VALUES (1, '[1,0,0]'), (2, '[0,1,0]'), (3, '[1,1,0]')");
      await client.query("CREATE INDEX ON small USING hnsw (embedding vector_cosine_ops)");
      await client.query("BEGIN");
      await client.query("SET LOCAL hnsw.iterative_scan = relaxed_order");
      await client.query("SET LOCAL enable_seqscan = off");
      const plan = await client.query(
        "EXPLAIN SELECT id FROM small ORDER BY embedding <=> '[1,0.1,0]' LIMIT 2",
      );
      expect(plan.rows.map((r) => r["QUERY PLAN"]).join("\n")).toMatch(
        /Index Scan using small_embedding_idx/,
      );
      const nearest = await client.query(
        "SELECT id, 1 - (embedding <=> '[1,0.1,0]') AS score FROM small ORDER BY embedding <=> '[1,0.1,0]' LIMIT 2",
      );
      await client.query("COMMIT");
      expect(nearest.rows.map((r) => r.id)).toEqual([1, 3]);
      expect(nearest.rows[0].score).toBeCloseTo(0.995, 3);
    } finally {
      await client.end();
    }
  });

  it("takes a statement larger than one read of its socket (a batch of wide vectors) whole", async () => {
    const client = await connect(database.databaseUrl);
    try {
      // About 1.4 MB of parameters: many TCP reads, each of which the server must not hand on alone.
      const vectors = Array.from({ length: 100 }, (_, i) => vectorText(1536, i));
      const values = vectors.map((_, i) => `(${i}, $${i + 1})`).join(", ");
      await client.query(`INSERT INTO items VALUES ${values}`, vectors);
      const { rows } = await client.query(
        "SELECT count(*)::int AS n, max(vector_dims(embedding)) AS width FROM items",
      );
      expect(rows[0]).toEqual({ n: 100, width: 1536 });
      await client.query("DELETE FROM items");
    } finally {
      await client.end();
    }
  });

  it("answers a batch whose messages end where the backend's reads of 8 KiB end", async () => {
    // PGlite's backend reads its input 8,192 bytes at a time and dropped what followed a message ending
    // exactly at such a read's end: this batch's Execute and Sync went unanswered and its client waited.
    const socket = await rawSession(database.port);
    try {
      const insert = "INSERT INTO boundary SELECT $1::text";
      await socket.ask(simpleQuery("CREATE TABLE boundary (t text)"));
      const framing = extendedQuery(insert, "").subarray(0, -15).length; // Parse, Bind and Describe of ""
      for (const end of [8192, 16_384, 32_768]) {
        const batch = extendedQuery(insert, "x".repeat(end - framing));
        // The Describe ends at `end`: Execute (10 bytes) and Sync (5) follow it.
        expect(batch.length - 15).toBe(end);
        const answer = await socket.ask(batch);
        expect(messageTypes(answer)).toEqual(["1", "2", "n", "C", "Z"]);
      }
      const count = await socket.ask(simpleQuery("SELECT count(*) FROM boundary"));
      expect(count.toString("latin1")).toContain("\u0001" + "3");
      await socket.ask(simpleQuery("DROP TABLE boundary"));
    } finally {
      socket.close();
    }
  });

  it("sends each answer as it was, however slowly its client reads", async () => {
    // PGlite writes every answer under 1 MiB into one buffer: one the socket still held, unsent, was overwritten.
    const socket = await rawSession(database.port);
    try {
      socket.pause();
      const letters = "abcdefghijkl".split("");
      for (const letter of letters) socket.send(simpleQuery(`SELECT repeat('${letter}', 900000) AS t`));
      // Every query runs while the client reads nothing: the answers wait in the server's socket.
      await new Promise((resolve) => setTimeout(resolve, 500));
      socket.resume();
      for (const letter of letters) {
        const answer = await socket.answer();
        expect(messageTypes(answer)).toEqual(["T", "D", "C", "Z"]);
        const text = answer.toString("latin1");
        expect(text.split(letter.repeat(1000)).length - 1).toBe(900);
      }
    } finally {
      socket.close();
    }
  });

  it("sends its clients a server's notices, not PGlite's debugging messages", async () => {
    const client = await connect(database.databaseUrl);
    const notices: string[] = [];
    client.on("notice", (notice) => notices.push(notice.message ?? ""));
    try {
      const { rows } = await client.query(
        "SELECT current_setting('client_min_messages') AS level, $1::int AS n",
        [1],
      );
      expect(rows).toEqual([{ level: "notice", n: 1 }]);
      await client.query("DO $$ BEGIN RAISE NOTICE 'said'; END $$");
      expect(notices).toEqual(["said"]);
    } finally {
      await client.end();
    }
  });

  it("rolls back what a client left open mid-transaction, and the others go on", async () => {
    const first = await connect(database.databaseUrl);
    const other = await connect(database.databaseUrl);
    try {
      await first.query("INSERT INTO items VALUES (1, $1)", [vectorText(1536, 1)]);
      await first.query("BEGIN");
      await first.query("INSERT INTO items VALUES (2, $1)", [vectorText(1536, 2)]);
      // Asked while the first holds the session in its transaction: answered once that ends.
      const seen = other.query("SELECT id FROM items ORDER BY id");
      cut(first);
      expect((await seen).rows).toEqual([{ id: 1 }]);
      await other.query("DELETE FROM items");
    } finally {
      await other.end();
    }
  });

  it("serves several connections at once, a transaction holding the session until it ends", async () => {
    const [a, b] = await Promise.all([connect(database.databaseUrl), connect(database.databaseUrl)]);
    try {
      // Both idle, both open: each is answered in turn (one at a time, the server would never answer b).
      expect((await b.query("SELECT 2 AS n")).rows).toEqual([{ n: 2 }]);
      expect((await a.query("SELECT 1 AS n")).rows).toEqual([{ n: 1 }]);
      await a.query("BEGIN");
      await a.query("INSERT INTO items VALUES (3, $1)", [vectorText(1536, 3)]);
      const order: string[] = [];
      const waiting = b.query("SELECT count(*)::int AS n FROM items").then((r) => {
        order.push("b read");
        return r.rows[0].n;
      });
      // b's read waits for a's transaction: it does not see a's row before the commit, nor run inside it.
      await a.query("SELECT pg_sleep(0.05)");
      order.push("a commits");
      await a.query("COMMIT");
      expect(await waiting).toBe(1);
      expect(order).toEqual(["a commits", "b read"]);
      await a.query("DELETE FROM items");
    } finally {
      await Promise.all([a.end(), b.end()]);
    }
  });

  it("a failed transaction holds the session until its client rolls it back", async () => {
    const [a, b] = await Promise.all([connect(database.databaseUrl), connect(database.databaseUrl)]);
    try {
      await a.query("BEGIN");
      await expect(a.query("SELECT * FROM nothing_here")).rejects.toThrow(/does not exist/);
      const other = b.query("SELECT 7 AS n");
      await a.query("ROLLBACK");
      expect((await other).rows).toEqual([{ n: 7 }]);
    } finally {
      await Promise.all([a.end(), b.end()]);
    }
  });

  it("resets the session once the last client is gone", async () => {
    const first = await connect(database.databaseUrl);
    await first.query("SET work_mem = '7MB'");
    await first.end();
    // The server learns of the close a moment after the client: ask until a client finds it done.
    await vi.waitFor(async () => {
      const client = await connect(database.databaseUrl);
      try {
        expect((await client.query("SELECT current_setting('work_mem') AS v")).rows[0].v).toBe("4MB");
        // The planner chooses as a PostgreSQL server's does (PGlite itself turns sequential scans off).
        expect((await client.query("SELECT current_setting('enable_seqscan') AS v")).rows[0].v).toBe("on");
      } finally {
        await client.end();
      }
    });
  });

  it("answers an error inside a transaction and goes on serving", async () => {
    const client = await connect(database.databaseUrl);
    try {
      await client.query("BEGIN");
      await expect(client.query("SELECT * FROM nothing_here")).rejects.toThrow(/does not exist/);
      await client.query("ROLLBACK");
      expect((await client.query("SELECT 2 AS two")).rows).toEqual([{ two: 2 }]);
    } finally {
      await client.end();
    }
  });
});

describe("the local vector database with a data directory", () => {
  let dataDir: string;
  beforeAll(async () => {
    dataDir = await mkdtemp(join(tmpdir(), "gw-vector-database-"));
  });
  afterAll(() => rm(dataDir, { recursive: true, force: true }));

  it("keeps its vectors across a restart", async () => {
    const env = { ...process.env, DATA_DIR: dataDir };
    // The first start copies the project's template (a new cluster); the second opens what it left.
    const templateFile = vectorDatabaseTemplateFile();
    let database = await startVectorDatabaseProcess({ port: 0, env, templateFile });
    try {
      const client = await connect(database.databaseUrl);
      await client.query("CREATE EXTENSION vector");
      await client.query("CREATE TABLE kept (id integer, embedding vector(3))");
      await client.query("INSERT INTO kept VALUES (1, '[1,2,3]')");
      await client.end();
    } finally {
      await database.stop();
    }
    database = await startVectorDatabaseProcess({ port: 0, env, templateFile });
    try {
      const client = await connect(database.databaseUrl);
      const { rows } = await client.query("SELECT id, embedding::text AS e FROM kept");
      await client.end();
      expect(rows).toEqual([{ id: 1, e: "[1,2,3]" }]);
    } finally {
      await database.stop();
    }
    // Two starts of PGlite on a data directory, each several seconds on a loaded machine.
  }, 120_000);

  /** A template made by the test below (one initdb in WebAssembly, seconds of CPU), then used by the one after it. */
  const templateFile = () => join(dataDir, "cache", "cluster.tar");
  /** The rows of one statement, on a connection of its own. */
  const rowsOf = async (url: string, sql: string) => {
    const client = await connect(url);
    try {
      return (await client.query(sql)).rows;
    } finally {
      await client.end();
    }
  };
  // Each cluster made by initdb has an identity of its own; one loaded from the template, the template's.
  const identity = async (url: string) =>
    String((await rowsOf(url, "SELECT system_identifier FROM pg_control_system()"))[0].system_identifier);
  /** A start on a data directory of its own under `dataDir` (`dir`), or in memory. */
  const start = (dir: string | undefined) =>
    startVectorDatabaseProcess({
      port: 0,
      env: dir ? { ...process.env, DATA_DIR: join(dataDir, dir) } : process.env,
      inMemory: dir === undefined,
      templateFile: templateFile(),
    });
  it("makes a missing template once when several start at once, in memory or on a new data directory: the others wait for it and load it", async () => {
    const starts = await Promise.all([undefined, undefined, "at-once"].map(start));
    try {
      const identities = await Promise.all(starts.map((started) => identity(started.databaseUrl)));
      expect(new Set(identities).size).toBe(1);
      expect((await stat(templateFile())).size).toBeGreaterThan(0);
      expect(existsSync(`${templateFile()}.lock`)).toBe(false);
    } finally {
      await Promise.all(starts.map((started) => started.stop()));
    }
  }, 120_000);

  it("starts a new data directory from the template's data directory form (made from the dump when missing), and leaves a cluster it finds as it is", async () => {
    // Run after the test above, the template is there; run alone, this first start makes it.
    let first = await start("first");
    let firstIdentity: string;
    try {
      firstIdentity = await identity(first.databaseUrl);
      await rowsOf(first.databaseUrl, "CREATE TABLE only_in_first (id integer)");
    } finally {
      await first.stop();
    }
    // A copy of the template's data directory: the dump's identity, and none of the first's later tables.
    const second = await start("second");
    try {
      expect(await identity(second.databaseUrl)).toBe(firstIdentity);
      expect(await rowsOf(second.databaseUrl, "SELECT to_regclass('only_in_first') AS t")).toEqual([
        { t: null },
      ]);
    } finally {
      await second.stop();
    }
    expect(existsSync(join(templateDirectoryOf(templateFile()), "PG_VERSION"))).toBe(true);
    first = await start("first");
    try {
      expect(await rowsOf(first.databaseUrl, "SELECT to_regclass('only_in_first')::text AS t")).toEqual([
        { t: "only_in_first" },
      ]);
    } finally {
      await first.stop();
    }
  }, 120_000);
});
