import { spawn } from "node:child_process";
import { copyFile, mkdtemp, readFile, rm, stat, truncate, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { DatabaseSync } from "node:sqlite";
import { v1 } from "@authzed/authzed-node";
import * as grpc from "@grpc/grpc-js";
import { afterAll, describe, expect, it, vi } from "vitest";
import type { SpiceDBEngine } from "../src/engine.ts";
import { isServing } from "../src/health.ts";
import { type SpiceDBLocalOptions, startSpiceDBLocal } from "../src/server.ts";

const SCHEMA = resolve(import.meta.dirname, "fixtures/caveats-and-expiration.zed");
const KEY = "test-preshared-key";
const FULLY = v1.Consistency.create({ requirement: { oneofKind: "fullyConsistent", fullyConsistent: true } });
const WRITE_PATH = "/authzed.api.v1.PermissionsService/WriteRelationships";

/**
 * `src/main.ts` in a process of its own, as `pnpm start` runs it, on the port it picks and reports over IPC;
 * ready once its health check answers SERVING. (The test kit's `startSpiceDBLocalProcess` does the same, but
 * this package's tests cannot depend on the kit, which is built on this package.) The IPC channel stops the
 * child if the test process dies first.
 */
async function startServerProcess(env: NodeJS.ProcessEnv) {
  const child = spawn(process.execPath, [resolve(import.meta.dirname, "../src/main.ts")], {
    env: { ...env, SPICEDB_LOCAL_PORT: "0" },
    stdio: ["ignore", "pipe", "pipe", "ipc"],
  });
  let output = "";
  for (const stream of [child.stdout, child.stderr])
    stream?.on("data", (chunk) => {
      output += chunk;
    });
  const exited = new Promise<void>((done) => child.once("exit", () => done()));
  const port = await new Promise<number>((done, fail) => {
    child.on("message", (message: { listening?: unknown }) => {
      if (typeof message?.listening === "number") done(message.listening);
    });
    void exited.then(() => fail(new Error(`spicedb-local exited before it listened:\n${output}`)));
  });
  await vi.waitFor(
    async () => {
      if (!(await isServing(`127.0.0.1:${port}`))) throw new Error("not SERVING yet");
    },
    { timeout: 60_000, interval: 50 },
  );
  return {
    port,
    process: child,
    outputTail: () => output,
    async stop() {
      child.kill("SIGTERM");
      await exited;
    },
  };
}

const dirs: string[] = [];
afterAll(async () => {
  for (const dir of dirs) await rm(dir, { recursive: true, force: true });
});
async function freshDir(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), "spicedb-local-data-"));
  dirs.push(dir);
  return dir;
}

interface LogLine {
  level: string;
  message: string;
  fields: Record<string, unknown>;
}
function recordingLog() {
  const lines: LogLine[] = [];
  const at = (level: string) => (fields: object, message: string) =>
    lines.push({ level, message, fields: fields as Record<string, unknown> });
  return { lines, info: at("info"), warn: at("warn"), error: at("error") };
}

async function open(dir: string, extra: Partial<SpiceDBLocalOptions> = {}) {
  const log = recordingLog();
  const server = await startSpiceDBLocal({
    host: "127.0.0.1",
    port: 0,
    presharedKey: KEY,
    schemaFile: SCHEMA,
    dataDir: dir,
    logger: log,
    ...extra,
  });
  const client = v1.NewClient(KEY, server.endpoint, v1.ClientSecurity.INSECURE_PLAINTEXT_CREDENTIALS);
  return {
    server,
    client,
    log,
    async close() {
      client.close();
      await server.close();
    },
  };
}

const object = (objectType: string, objectId: string) => v1.ObjectReference.create({ objectType, objectId });
function rel(
  resource: string,
  relation: string,
  user: string,
  extra: { caveat?: Record<string, string>; expiresAt?: number } = {},
): v1.Relationship {
  const [type, id] = resource.split(":") as [string, string];
  return v1.Relationship.create({
    resource: object(type, id),
    relation,
    subject: v1.SubjectReference.create({ object: object("user", user) }),
    optionalCaveat: extra.caveat
      ? v1.ContextualizedCaveat.create({
          caveatName: "same_org",
          context: v1.PbStruct.fromJson(extra.caveat),
        })
      : undefined,
    optionalExpiresAt:
      extra.expiresAt === undefined
        ? undefined
        : { seconds: String(Math.floor(extra.expiresAt / 1000)), nanos: (extra.expiresAt % 1000) * 1e6 },
  });
}
const update = (operation: v1.RelationshipUpdate_Operation, relationship: v1.Relationship) =>
  v1.RelationshipUpdate.create({ operation, relationship });
const touch = (...relationships: v1.Relationship[]) =>
  v1.WriteRelationshipsRequest.create({
    updates: relationships.map((r) => update(v1.RelationshipUpdate_Operation.TOUCH, r)),
  });
const remove = (...relationships: v1.Relationship[]) =>
  v1.WriteRelationshipsRequest.create({
    updates: relationships.map((r) => update(v1.RelationshipUpdate_Operation.DELETE, r)),
  });

/** Every relationship, exactly as the engine returns it (caveat, context, expiration), one JSON line each. */
async function state(client: v1.ZedClientInterface): Promise<string[]> {
  const lines: string[] = [];
  for (const resourceType of ["doc", "folder"]) {
    const read = await client.promises.readRelationships(
      v1.ReadRelationshipsRequest.create({
        consistency: FULLY,
        relationshipFilter: v1.RelationshipFilter.create({ resourceType }),
      }),
    );
    lines.push(...read.map((r) => JSON.stringify(v1.Relationship.toJson(r.relationship!))));
  }
  return lines.sort();
}
const ids = (lines: string[]) => lines.map((line) => JSON.parse(line).resource.objectId as string);

async function canRead(client: v1.ZedClientInterface, doc: string, user: string, context?: object) {
  const { permissionship } = await client.promises.checkPermission(
    v1.CheckPermissionRequest.create({
      consistency: FULLY,
      resource: object("doc", doc),
      permission: "read",
      subject: v1.SubjectReference.create({ object: object("user", user) }),
      context: context ? v1.PbStruct.fromJson(context as never) : undefined,
    }),
  );
  return permissionship === v1.CheckPermissionResponse_Permissionship.HAS_PERMISSION;
}

async function waitFor(condition: () => Promise<boolean>, what: string, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

const DATABASE = "relationships.sqlite";

/** The resource ids the directory's database holds, read independently of the server (which must be stopped). */
function storedIds(dir: string): string[] {
  const db = new DatabaseSync(join(dir, DATABASE), { readOnly: true });
  try {
    const rows = db.prepare("SELECT relationship FROM relationship").all() as { relationship: Uint8Array }[];
    return rows.map((row) => v1.Relationship.fromBinary(row.relationship).resource!.objectId).sort();
  } finally {
    db.close();
  }
}

describe("the local SpiceDB keeps its relationships in a data directory", () => {
  it("brings back every relationship after a clean close: caveats with their context, expirations, deletes and replacements", async () => {
    const dir = await freshDir();
    const first = await open(dir);
    const inOneHour = Date.now() + 3_600_000 + 123;
    await first.client.promises.writeRelationships(
      touch(
        rel("doc:d1", "owner", "alice"),
        rel("doc:d1", "reader", "*", { caveat: { resource_org: "acme" } }),
        rel("doc:d1", "reader", "bob", { expiresAt: inOneHour }),
        rel("doc:d2", "reader", "carol"),
        rel("doc:d2", "reader", "*", { caveat: { resource_org: "globex" } }),
        rel("folder:f1", "viewer", "alice"),
      ),
    );
    await first.client.promises.writeRelationships(remove(rel("doc:d2", "reader", "carol")));
    await first.client.promises.writeRelationships(
      touch(rel("doc:d2", "reader", "*", { caveat: { resource_org: "acme" } })),
    );
    const bulk = Array.from({ length: 50 }, (_, i) => rel(`doc:bulk${i}`, "owner", "alice"));
    await Promise.all(bulk.map((r) => first.client.promises.writeRelationships(touch(r))));
    const before = await state(first.client);
    await first.close();

    const second = await open(dir);
    const after = await state(second.client);
    expect(after).toEqual(before);
    expect(before).toHaveLength(5 + 50);
    expect(after).toContain(
      JSON.stringify({
        resource: { objectType: "doc", objectId: "d2" },
        relation: "reader",
        subject: { object: { objectType: "user", objectId: "*" } },
        optionalCaveat: { caveatName: "same_org", context: { resource_org: "acme" } },
      }),
    );
    const bob = JSON.parse(after.find((line) => line.includes('"bob"'))!);
    expect(Date.parse(bob.optionalExpiresAt)).toBe(inOneHour);
    // The caveat still decides: the wildcard admits a subject of the same organization only.
    expect(await canRead(second.client, "d1", "erin", { subject_org: "acme" })).toBe(true);
    expect(await canRead(second.client, "d1", "erin", { subject_org: "globex" })).toBe(false);
    expect(await canRead(second.client, "d2", "carol", { subject_org: "globex" })).toBe(false);
    await second.close();
  });

  it("answers a write only once it is stored", async () => {
    const dir = await freshDir();
    let hold: Promise<void> | undefined;
    let committed = () => {};
    const seen = new Promise<void>((resolve) => {
      committed = resolve;
    });
    const first = await open(dir, {
      persistenceHooks: {
        onWatchMessage: (message) => {
          if (hold && v1.WatchResponse.fromBinary(message).updates.length > 0) committed();
          return hold;
        },
      },
    });
    let release = () => {};
    hold = new Promise((resolve) => {
      release = resolve;
    });
    let answered = false;
    const write = first.client.promises
      .writeRelationships(touch(rel("doc:held", "owner", "alice")))
      .then(() => {
        answered = true;
      });
    await seen; // the engine has committed it; the store has not seen it yet
    // The engine runs writes one after another, and a schema write waits for no store: once it is
    // answered, the relationship write's answer would have been sent before it, had it not waited.
    await first.client.promises.writeSchema(
      v1.WriteSchemaRequest.create({ schema: await readFile(SCHEMA, "utf8") }),
    );
    expect(answered).toBe(false);
    hold = undefined;
    release();
    await write;
    await first.close();
    expect(storedIds(dir)).toEqual(["held"]);
  });

  it("does not bring back relationships that expired while it was down", async () => {
    const dir = await freshDir();
    const first = await open(dir);
    const soon = Date.now() + 1_500;
    await first.client.promises.writeRelationships(
      touch(rel("doc:d1", "owner", "alice"), rel("doc:d1", "reader", "dan", { expiresAt: soon })),
    );
    await first.client.promises.writeRelationships(
      touch(rel("doc:d1", "reader", "erin", { expiresAt: soon })),
    );
    expect(await canRead(first.client, "d1", "erin")).toBe(true);
    await waitFor(
      async () => !(await canRead(first.client, "d1", "dan")) && !(await canRead(first.client, "d1", "erin")),
      "dan's and erin's grants expire",
    );
    await first.close();

    const second = await open(dir);
    expect(ids(await state(second.client))).toEqual(["d1"]);
    const restored = second.log.lines.find(
      (l) => l.message === "relationships restored from the data directory",
    );
    expect(restored?.fields).toMatchObject({ relationships: 1, expiredDropped: 2 });
    await second.client.promises.writeRelationships(touch(rel("doc:d1", "reader", "dan")));
    expect(await canRead(second.client, "d1", "dan")).toBe(true);
    await second.close();
  });

  it("after kill -9 of a real server process, restarts with every write it acknowledged", async () => {
    const dataDir = await freshDir();
    const start = () =>
      startServerProcess({
        PATH: process.env.PATH,
        DATA_DIR: dataDir,
        SPICEDB_PRESHARED_KEY: KEY,
        SPICEDB_SCHEMA_FILE: SCHEMA,
        LOG_LEVEL: "warn",
      });
    const connect = (port: number) =>
      v1.NewClient(KEY, `127.0.0.1:${port}`, v1.ClientSecurity.INSECURE_PLAINTEXT_CREDENTIALS);
    let child = await start();
    // node:sqlite is stable enough on the pinned Node not to warn on every start.
    expect(child.outputTail()).not.toMatch(/ExperimentalWarning|SQLite is an experimental/);
    let client = connect(child.port);
    for (let i = 0; i < 40; i++)
      await client.promises.writeRelationships(touch(rel(`doc:a${i}`, "owner", "alice")));
    await client.promises.writeRelationships(remove(rel("doc:a7", "owner", "alice")));
    const exited = new Promise((r) => child.process.once("exit", r));
    child.process.kill("SIGKILL"); // right after the last answer
    await exited;
    client.close();

    const expected = Array.from({ length: 40 }, (_, i) => `a${i}`)
      .filter((id) => id !== "a7")
      .sort();
    expect(storedIds(join(dataDir, "spicedb"))).toEqual(expected);
    child = await start();
    client = connect(child.port);
    expect(ids(await state(client)).sort()).toEqual(expected);
    client.close();
    await child.stop();
  });

  it("starts from files left by a write cut short (a kill -9 in the middle of a commit), and writes after it", async () => {
    const dir = await freshDir();
    const first = await open(dir);
    for (const id of ["t1", "t2", "t3"])
      await first.client.promises.writeRelationships(touch(rel(`doc:${id}`, "owner", "alice")));
    // The files as a kill -9 at this moment leaves them, with the last commit's last bytes not written.
    const crashed = await freshDir();
    await copyFile(join(dir, DATABASE), join(crashed, DATABASE));
    await copyFile(join(dir, `${DATABASE}-wal`), join(crashed, `${DATABASE}-wal`));
    await first.close();
    const wal = join(crashed, `${DATABASE}-wal`);
    await truncate(wal, (await stat(wal)).size - 5);

    const second = await open(crashed);
    expect(ids(await state(second.client))).toEqual(["t1", "t2"]);
    await second.client.promises.writeRelationships(touch(rel("doc:t4", "owner", "alice")));
    await second.close();

    const third = await open(crashed);
    expect(ids(await state(third.client))).toEqual(["t1", "t2", "t4"]);
    expect(third.log.lines.filter((l) => l.level !== "info")).toEqual([]);
    await third.close();
  });

  it("will not start on a damaged database, and says which file and what to do", async () => {
    const dir = await freshDir();
    const first = await open(dir);
    await first.client.promises.writeRelationships(touch(rel("doc:c1", "owner", "alice")));
    await first.close();
    const path = join(dir, DATABASE);
    const damaged = await readFile(path);
    damaged.fill(0xff, 0, 100); // the header
    await writeFile(path, damaged);
    const refused = await open(dir).then(
      (server) => server.close(),
      (err: Error) => err.message,
    );
    expect(refused).toContain(`${path} is damaged`);
    expect(refused).toMatch(/restore it from a backup, or remove the directory to start empty/);
  });

  it("holds only the relationships there are, not their history", async () => {
    const dir = await freshDir();
    const first = await open(dir);
    for (let i = 0; i < 150; i++) {
      await first.client.promises.writeRelationships(
        touch(rel(`doc:k${i}`, "reader", "*", { caveat: { resource_org: `org${i}` } })),
      );
    }
    for (let i = 0; i < 50; i++)
      await first.client.promises.writeRelationships(remove(rel(`doc:k${i}`, "reader", "*")));
    for (let i = 50; i < 60; i++) {
      await first.client.promises.writeRelationships(
        touch(rel(`doc:k${i}`, "reader", "*", { caveat: { resource_org: "replaced" } })),
      );
    }
    const before = await state(first.client);
    await first.close();
    expect(storedIds(dir)).toEqual(Array.from({ length: 100 }, (_, i) => `k${i + 50}`).sort());

    const second = await open(dir);
    expect(await state(second.client)).toEqual(before);
    expect(before.filter((line) => line.includes('"replaced"'))).toHaveLength(10);
    await second.close();
  });

  it("logs how many relationships it will restore, and its progress while it does", async () => {
    const dir = await freshDir();
    const first = await open(dir);
    for (let i = 0; i < 2500; i += 500)
      await first.client.promises.writeRelationships(
        touch(...Array.from({ length: 500 }, (_, j) => rel(`doc:p${i + j}`, "owner", "alice"))),
      );
    await first.close();

    const second = await open(dir, { replayProgressEveryMs: 0 });
    const lines = second.log.lines.map((l) => [l.message, l.fields.relationships ?? l.fields.restored]);
    expect(lines.filter(([message]) => String(message).includes("restor"))).toEqual([
      ["restoring relationships from the data directory", 2500],
      ["restoring relationships", 1000],
      ["restoring relationships", 2000],
      ["restoring relationships", 2500],
      ["relationships restored from the data directory", 2500],
    ]);
    await second.close();
  });

  it("stores a write committed between the replay and the opening of its Watch", async () => {
    const dir = await freshDir();
    const first = await open(dir);
    await first.client.promises.writeRelationships(touch(rel("doc:before", "owner", "alice")));
    await first.close();

    const second = await open(dir, {
      persistenceHooks: {
        beforeWatch: async (engine: SpiceDBEngine) => {
          await engine.call(
            WRITE_PATH,
            v1.WriteRelationshipsRequest.toBinary(touch(rel("doc:raced", "owner", "alice"))),
          );
        },
      },
    });
    await second.close();

    const third = await open(dir);
    expect(ids(await state(third.client))).toEqual(["before", "raced"]);
    await third.close();
  });

  it("will not start with relationships its schema file no longer allows, and says why", async () => {
    const dir = await freshDir();
    const first = await open(dir);
    await first.client.promises.writeRelationships(
      touch(rel("doc:d1", "reader", "*", { caveat: { resource_org: "acme" } })),
    );
    await first.close();
    const narrower = join(dir, "narrower.zed");
    await writeFile(narrower, (await readFile(SCHEMA, "utf8")).replace(" | user:* with same_org", ""));
    await expect(open(dir, { schemaFile: narrower })).rejects.toThrow(
      /could not be written back: .*user:\*.*change it back \(or migrate them\), or remove the directory/s,
    );
    const again = await open(dir);
    expect(ids(await state(again.client))).toEqual(["d1"]);
    await again.close();
  });

  it("refuses a second server on the same directory", async () => {
    const dir = await freshDir();
    const first = await open(dir);
    await expect(open(dir)).rejects.toThrow(/in use by another process/);
    await first.close();
    const again = await open(dir);
    await again.close();
  });

  it("refuses writes once the data directory cannot be written, and still answers reads", async () => {
    const dir = await freshDir();
    let db: DatabaseSync | undefined;
    const first = await open(dir, { persistenceHooks: { onStoreOpen: (opened) => (db = opened) } });
    await first.client.promises.writeRelationships(touch(rel("doc:d1", "owner", "alice")));
    // As a full disk would: every later commit to the database fails.
    db!.exec(
      "CREATE TEMP TRIGGER full BEFORE INSERT ON relationship BEGIN SELECT RAISE(ABORT, 'database or disk is full'); END",
    );
    await expect(
      first.client.promises.writeRelationships(touch(rel("doc:d2", "owner", "alice"))),
    ).rejects.toMatchObject({
      code: grpc.status.UNAVAILABLE,
      details: expect.stringMatching(/disk is full/),
    });
    await expect(
      first.client.promises.writeRelationships(touch(rel("doc:d3", "owner", "alice"))),
    ).rejects.toMatchObject({ code: grpc.status.UNAVAILABLE });
    expect(await canRead(first.client, "d1", "alice")).toBe(true);
    expect(
      first.log.lines.some((l) => l.level === "error" && /data directory cannot be written/.test(l.message)),
    ).toBe(true);
    await first.close();
    expect(storedIds(dir)).toEqual(["d1"]);
  });
});

describe("recycleAfterWrites: the engine replaced by a fresh one restored from the directory", () => {
  it("keeps every relationship and write across replacements, with writes sent while one runs", async () => {
    const dir = await freshDir();
    const local = await open(dir, { recycleAfterWrites: 3 });
    const written: string[] = [];
    try {
      // Four writes at a time, until three replacements have happened (each fills the fresh engine while
      // writes go on, then catches up with them): every write lands before, during or after one.
      for (let round = 0; local.server.recycles() < 3; round++) {
        if (round > 200) throw new Error("no replacements");
        const ids = Array.from({ length: 4 }, (_, i) => `r${round}x${i}`);
        await Promise.all(
          ids.map((id) => local.client.promises.writeRelationships(touch(rel(`doc:${id}`, "reader", "bob")))),
        );
        written.push(...ids);
      }
      await local.client.promises.writeRelationships(remove(rel(`doc:${written[0]}`, "reader", "bob")));
      const expected = written.slice(1).sort();
      expect(ids(await state(local.client)).sort()).toEqual(expected);
      expect(await canRead(local.client, written.at(-1)!, "bob")).toBe(true);
      expect(await canRead(local.client, written[0]!, "bob")).toBe(false);
      expect(local.log.lines.filter((l) => l.level === "error")).toEqual([]);
      expect(
        local.log.lines.filter((l) => l.message.startsWith("engine replaced")).length,
      ).toBeGreaterThanOrEqual(3);
    } finally {
      await local.close();
    }
    // And the directory holds exactly that.
    expect(storedIds(dir).sort()).toEqual(written.slice(1).sort());
  });

  it("catches the fresh engine up with the writes and deletes made while it was being filled", async () => {
    const dir = await freshDir();
    let local: Awaited<ReturnType<typeof open>> | undefined;
    let during = 0;
    local = await open(dir, {
      recycleAfterWrites: 3,
      persistenceHooks: {
        // Forced interleaving: these land on the old engine after the fresh one was filled.
        afterReplayInto: async () => {
          if (during++ > 0) return;
          await local!.client.promises.writeRelationships(touch(rel("doc:during", "owner", "carol")));
          await local!.client.promises.writeRelationships(remove(rel("doc:a0", "owner", "alice")));
          await local!.client.promises.writeRelationships(touch(rel("doc:a1", "reader", "dave")));
        },
      },
    });
    try {
      for (let i = 0; i < 3; i++)
        await local.client.promises.writeRelationships(touch(rel(`doc:a${i}`, "owner", "alice")));
      await waitFor(async () => local!.server.recycles() >= 1, "a replacement");
      expect(during).toBe(1);
      expect(ids(await state(local.client)).sort()).toEqual(["a1", "a1", "a2", "during"]);
      expect(await canRead(local.client, "during", "carol")).toBe(true);
      expect(await canRead(local.client, "a0", "alice")).toBe(false);
      expect(await canRead(local.client, "a1", "dave")).toBe(true);
    } finally {
      await local.close();
    }
    expect(storedIds(dir).sort()).toEqual(["a1", "a1", "a2", "during"]);
  });

  it("catches up in rounds while writes go on: the changes made during the fill are applied before writes wait, none while they do, and the database is handed over", async () => {
    const dir = await freshDir();
    let local: Awaited<ReturnType<typeof open>> | undefined;
    let during = 0;
    let opened = 0;
    const made: string[] = [];
    local = await open(dir, {
      recycleAfterWrites: 3,
      persistenceHooks: {
        onStoreOpen: () => {
          opened++;
        },
        // Forced interleaving: 120 changes land on the old engine once the fresh one is filled,
        // more than a pause may apply (50).
        afterReplayInto: async () => {
          if (during++ > 0) return;
          for (let batch = 0; batch < 3; batch++) {
            const docs = Array.from({ length: 40 }, (_, i) => `c${batch}x${i}`);
            await local!.client.promises.writeRelationships(
              touch(...docs.map((doc) => rel(`doc:${doc}`, "reader", "erin"))),
            );
            made.push(...docs);
          }
        },
      },
    });
    try {
      for (let i = 0; i < 3; i++)
        await local.client.promises.writeRelationships(touch(rel(`doc:b${i}`, "owner", "alice")));
      await waitFor(async () => local!.server.recycles() >= 1, "a replacement");
      const stats = local.server.recycleStats();
      expect(stats.lastCaughtUp).toBe(120);
      expect(stats.lastAppliedInPause).toBe(0);
      expect(stats.relationshipsFilled).toBe(3);
      // The database was handed over to the fresh engine's store, not closed and opened again in the pause.
      expect(opened).toBe(1);
      expect(ids(await state(local.client)).sort()).toEqual(["b0", "b1", "b2", ...made].sort());
      expect(await canRead(local.client, "c2x39", "erin")).toBe(true);
    } finally {
      await local.close();
    }
    expect(storedIds(dir)).toEqual(["b0", "b1", "b2", ...made].sort());
  });

  it("waits for writes in proportion to the relationships held (recycleFraction), so its history stays proportional to them", async () => {
    const dir = await freshDir();
    const first = await open(dir);
    await first.client.promises.writeRelationships(
      touch(...Array.from({ length: 40 }, (_, i) => rel(`doc:h${i}`, "owner", "alice"))),
    );
    await first.close();

    const local = await open(dir, { recycleAfterWrites: 3, recycleFraction: 0.5 });
    try {
      // Filled with 40 at start: replaced after max(3, 0.5 × 40) = 20 writes, not 3.
      expect(local.server.recycleStats()).toMatchObject({
        relationshipsFilled: 40,
        threshold: 20,
        writes: 0,
      });
      for (let i = 0; i < 19; i++)
        await local.client.promises.writeRelationships(touch(rel(`doc:n${i}`, "owner", "alice")));
      expect(local.server.recycleStats()).toMatchObject({ recycles: 0, writes: 19 });
      await local.client.promises.writeRelationships(touch(rel("doc:n19", "owner", "alice")));
      await waitFor(async () => local.server.recycles() >= 1, "a replacement");
      // The fresh engine was filled with the 60 held then: the next replacement waits for 30 writes.
      expect(local.server.recycleStats()).toMatchObject({
        recycles: 1,
        relationshipsFilled: 60,
        threshold: 30,
        writes: 0,
      });
      expect(await canRead(local.client, "n19", "alice")).toBe(true);
    } finally {
      await local.close();
    }
  });

  it("is off without a data directory", async () => {
    const server = await startSpiceDBLocal({
      host: "127.0.0.1",
      port: 0,
      presharedKey: KEY,
      schemaFile: SCHEMA,
      recycleAfterWrites: 1,
    });
    const client = v1.NewClient(KEY, server.endpoint, v1.ClientSecurity.INSECURE_PLAINTEXT_CREDENTIALS);
    try {
      for (let i = 0; i < 3; i++)
        await client.promises.writeRelationships(touch(rel(`doc:m${i}`, "owner", "alice")));
      expect(server.recycles()).toBe(0);
      expect(ids(await state(client)).sort()).toEqual(["m0", "m1", "m2"]);
    } finally {
      client.close();
      await server.close();
    }
  });
});
