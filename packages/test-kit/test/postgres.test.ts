import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { connect, createServer, type Server, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { errorBody } from "@gw/core/errors";
import {
  createPostgres,
  isPostgresOutage,
  migrate,
  migrateWhenReachable,
  type Postgres,
  PostgresUnavailable,
  postgresReady,
} from "@gw/core/postgres";
import { RedisUnavailable } from "@gw/core/redis";
import { freePort } from "@gw/devstack";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { useTestDatabase } from "../src/index.ts";

describe("migrate", () => {
  const database = useTestDatabase({ migrated: false });
  let dir: string;
  let admin: pg.Client;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "gw-migrations-"));
    admin = new pg.Client({ connectionString: database.url });
    await admin.connect();
  });
  afterAll(async () => {
    await admin?.end();
    await rm(dir, { recursive: true, force: true });
  });

  const versions = async () =>
    (await admin.query("SELECT version FROM schema_migrations ORDER BY version")).rows.map((r) => r.version);

  it("applies each file once, in the order of the names, and records it", async () => {
    await writeFile(join(dir, "0002_b.sql"), "INSERT INTO t (v) VALUES ('second');");
    await writeFile(
      join(dir, "0001_a.sql"),
      "CREATE TABLE t (v text NOT NULL); INSERT INTO t VALUES ('first');",
    );
    await writeFile(join(dir, "notes.txt"), "not a migration");
    expect(await migrate(database.url, dir)).toEqual(["0001_a", "0002_b"]);
    expect(await migrate(database.url, dir)).toEqual([]);
    expect(await versions()).toEqual(["0001_a", "0002_b"]);
    expect((await admin.query("SELECT v FROM t ORDER BY ctid")).rows.map((r) => r.v)).toEqual([
      "first",
      "second",
    ]);
  });

  it("applies a file merged later even when it sorts before files already applied", async () => {
    await writeFile(join(dir, "0001_z.sql"), "INSERT INTO t (v) VALUES ('late');");
    expect(await migrate(database.url, dir)).toEqual(["0001_z"]);
    expect(await versions()).toEqual(["0001_a", "0001_z", "0002_b"]);
  });

  it("leaves nothing of a file that fails: no table, no record, and says which file", async () => {
    await writeFile(join(dir, "0003_bad.sql"), "CREATE TABLE half (v text); SELECT no_such_function();");
    await expect(migrate(database.url, dir)).rejects.toThrow(/migration 0003_bad\.sql failed/);
    expect(await versions()).not.toContain("0003_bad");
    expect((await admin.query("SELECT to_regclass('half') AS t")).rows[0].t).toBeNull();
    await rm(join(dir, "0003_bad.sql"));
  });

  it("lets one process at a time migrate: others wait for the lock, then find the work done", async () => {
    await writeFile(join(dir, "0004_once.sql"), "INSERT INTO t (v) VALUES ('once');");
    // Hold the lock, so both runs are certainly waiting on it at the same time.
    const holder = new pg.Client({ connectionString: database.url });
    await holder.connect();
    await holder.query("SELECT pg_advisory_lock($1)", [0x67773a6d]);
    const runs = [migrate(database.url, dir), migrate(database.url, dir)];
    const waiting = async () =>
      Number(
        (
          await admin.query(
            "SELECT count(*) AS n FROM pg_stat_activity WHERE datname = $1 AND wait_event = 'advisory'",
            [database.name],
          )
        ).rows[0].n,
      );
    await expect.poll(waiting).toBe(2);
    await holder.query("SELECT pg_advisory_unlock($1)", [0x67773a6d]);
    await holder.end();
    const results = await Promise.all(runs);
    expect(results.flat()).toEqual(["0004_once"]);
    expect((await admin.query("SELECT count(*) AS n FROM t WHERE v = 'once'")).rows[0].n).toBe("1");
  });
});

describe("migrateWhenReachable", () => {
  const database = useTestDatabase({ migrated: false });
  const closing: (() => Promise<void>)[] = [];
  afterAll(async () => {
    for (const close of closing) await close();
  });

  it("waits while PostgreSQL cannot be reached, saying where (no password) and why, then migrates once it can", async () => {
    const dir = await mkdtemp(join(tmpdir(), "gw-migrations-"));
    closing.push(() => rm(dir, { recursive: true, force: true }));
    await writeFile(join(dir, "0001_w.sql"), "CREATE TABLE w (v int);");
    // The same database, through a port where nothing listens until the first wait is told.
    const port = await freePort();
    const url = new URL(database.url);
    const target = Number(url.port);
    url.port = String(port);
    url.username ||= "gateway";
    url.password = "hunter2";
    const waits: Record<string, unknown>[] = [];
    let relay: Server | undefined;
    const logger = {
      info: () => {},
      warn: (fields: Record<string, unknown>, message: string) => {
        waits.push({ ...fields, message });
        if (relay) return;
        relay = createServer((client) => {
          const upstream = connect(target, "127.0.0.1");
          client.on("error", () => upstream.destroy());
          upstream.on("error", () => client.destroy());
          client.pipe(upstream).pipe(client);
        }).listen(port, "127.0.0.1");
        closing.push(() => new Promise<void>((resolve) => relay!.close(() => resolve())));
      },
    };
    const applied = await migrateWhenReachable(url.toString(), logger as never, { dir, pausesMs: [50] });
    expect(applied).toEqual(["0001_w"]);
    expect(waits.length).toBeGreaterThanOrEqual(1);
    expect(waits[0]).toMatchObject({
      database: expect.stringContaining(`127.0.0.1:${port}`),
      reason: expect.stringMatching(/ECONNREFUSED/),
      retryInMs: 50,
      message: "PostgreSQL cannot be reached yet: waiting for it before starting",
    });
    expect(JSON.stringify(waits)).not.toContain("hunter2");
  });

  it("does not wait on a migration that fails: it is thrown at once", async () => {
    const dir = await mkdtemp(join(tmpdir(), "gw-migrations-"));
    closing.push(() => rm(dir, { recursive: true, force: true }));
    await writeFile(join(dir, "0001_bad.sql"), "SELECT no_such_function();");
    const waits: unknown[] = [];
    await expect(
      migrateWhenReachable(database.url, { warn: (f: unknown) => waits.push(f) } as never, { dir }),
    ).rejects.toThrow(/migration 0001_bad\.sql failed/);
    expect(waits).toEqual([]);
  });
});

describe("createPostgres", () => {
  const database = useTestDatabase({ migrated: false });
  let db: Postgres;

  beforeAll(async () => {
    db = createPostgres(database.url, { connectionName: "test", statementTimeoutMs: 200 });
    await db.query("CREATE TABLE items (id text PRIMARY KEY, v int NOT NULL)");
  });
  afterAll(() => db?.close());

  it("reports each statement's latency, and its error by kind, to its observer", async () => {
    const seen: [string, string | undefined][] = [];
    const observed = createPostgres(database.url, {
      connectionName: "observed",
      statementTimeoutMs: 200,
      metrics: {
        track: (client) => seen.push([client, "track"]),
        observe: (client, _s, error) => seen.push([client, error]),
      },
    });
    await observed.query("SELECT 1");
    await observed.query("SELECT pg_sleep(1)").catch(() => {});
    await observed.query("SELECT no_such_function()").catch(() => {});
    await observed.close();
    expect(seen).toEqual([
      ["observed", "track"],
      ["observed", undefined],
      ["observed", "unavailable"],
      ["observed", "refused"],
    ]);
  });

  it("runs parameterized statements", async () => {
    await db.query("INSERT INTO items (id, v) VALUES ($1, $2)", ["a'; DROP TABLE items; --", 1]);
    const { rows } = await db.query<{ id: string }>("SELECT id FROM items WHERE v = $1", [1]);
    expect(rows).toEqual([{ id: "a'; DROP TABLE items; --" }]);
    expect(await postgresReady(db)).toBe(true);
  });

  it("passes PostgreSQL's own refusals through unchanged (a unique violation is not an outage)", async () => {
    await db.query("INSERT INTO items (id, v) VALUES ('dup', 1)");
    const err = await db.query("INSERT INTO items (id, v) VALUES ('dup', 2)").catch((e: unknown) => e);
    expect(err).toBeInstanceOf(pg.DatabaseError);
    expect((err as pg.DatabaseError).code).toBe("23505");
    expect(isPostgresOutage(err)).toBe(false);
  });

  it("turns a statement past its deadline into PostgresUnavailable", async () => {
    const err = await db.query("SELECT pg_sleep(2)").catch((e: unknown) => e);
    expect(err).toBeInstanceOf(PostgresUnavailable);
    expect((err as PostgresUnavailable).status).toBe(503);
    // The pool still serves afterwards.
    expect(await postgresReady(db)).toBe(true);
  });

  it("commits a transaction whole, or rolls it back whole when its work throws", async () => {
    await db.transaction(async (tx) => {
      await tx.query("INSERT INTO items (id, v) VALUES ($1, 10)", ["tx-1"]);
      await tx.query("INSERT INTO items (id, v) VALUES ($1, 10)", ["tx-2"]);
    });
    await expect(
      db.transaction(async (tx) => {
        await tx.query("INSERT INTO items (id, v) VALUES ($1, 20)", ["tx-3"]);
        throw new Error("changed my mind");
      }),
    ).rejects.toThrow("changed my mind");
    await expect(
      db.transaction(async (tx) => {
        await tx.query("INSERT INTO items (id, v) VALUES ($1, 20)", ["tx-4"]);
        await tx.query("SELECT pg_sleep(2)");
      }),
    ).rejects.toBeInstanceOf(PostgresUnavailable);
    const { rows } = await db.query<{ id: string }>("SELECT id FROM items WHERE id LIKE 'tx-%' ORDER BY id");
    expect(rows.map((r) => r.id)).toEqual(["tx-1", "tx-2"]);
  });
});

describe("PostgreSQL out of reach", () => {
  let silent: Server;
  let silentPort: number;
  const sockets: Socket[] = [];
  beforeAll(async () => {
    // Accepts connections and never answers: a hung server.
    silent = createServer((socket) => sockets.push(socket));
    silentPort = await freePort();
    await new Promise<void>((resolve) => silent.listen(silentPort, "127.0.0.1", resolve));
  });
  afterAll(async () => {
    for (const socket of sockets) socket.destroy();
    await new Promise<void>((resolve) => silent.close(() => resolve()));
  });

  it("a refused connection and a server that never answers are both PostgresUnavailable", async () => {
    const deadPort = await freePort();
    for (const url of [
      `postgres://gateway@127.0.0.1:${deadPort}/gateway`,
      `postgres://gateway@127.0.0.1:${silentPort}/gateway`,
    ]) {
      const db = createPostgres(url, { connectionName: "test", connectTimeoutMs: 300 });
      await expect(db.query("SELECT 1")).rejects.toBeInstanceOf(PostgresUnavailable);
      await expect(db.transaction(async (tx) => tx.query("SELECT 1"))).rejects.toBeInstanceOf(
        PostgresUnavailable,
      );
      expect(await postgresReady(db, 1_000)).toBe(false);
      await db.close();
    }
  });

  it("is the catalogue's 503, with the same body as a Redis outage", async () => {
    const db = createPostgres(`postgres://gateway@127.0.0.1:${await freePort()}/gateway`, {
      connectionName: "test",
      connectTimeoutMs: 300,
    });
    const err = (await db.query("SELECT 1").catch((e: unknown) => e)) as PostgresUnavailable;
    await db.close();
    expect(err.status).toBe(503);
    expect(errorBody(err)).toEqual(errorBody(new RedisUnavailable(new Error("gone"))));
    expect(errorBody(err)).toEqual({
      error: "Service Unavailable",
      message: "The data store is unavailable; try again",
      code: "data_store_unavailable",
    });
  });
});
