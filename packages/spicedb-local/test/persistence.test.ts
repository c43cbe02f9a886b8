import { mkdir, mkdtemp, readdir, readFile, rm, stat, truncate, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { v1 } from "@authzed/authzed-node";
import * as grpc from "@grpc/grpc-js";
import { freePort, startSpiceDBLocalProcess } from "@gw/devstack";
import { afterAll, describe, expect, it } from "vitest";
import type { SpiceDBEngine } from "../src/engine.ts";
import { revisionOf } from "../src/persistence/revision.ts";
import { type SpiceDBLocalOptions, startSpiceDBLocal } from "../src/server.ts";

const SCHEMA = resolve(import.meta.dirname, "fixtures/caveats-and-expiration.zed");
const KEY = "test-preshared-key";
const FULLY = v1.Consistency.create({ requirement: { oneofKind: "fullyConsistent", fullyConsistent: true } });
const WRITE_PATH = "/authzed.api.v1.PermissionsService/WriteRelationships";

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
    snapshotAfterBytes: 1 << 30,
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

const files = async (dir: string) => (await readdir(dir)).sort();
const journals = async (dir: string) => (await files(dir)).filter((f) => /^journal\.\d+$/.test(f));

/**
 * The resource ids the journal files hold, read independently of the server:
 * `[u32 length][u32 crc32][payload]` records, the first a JSON header, the
 * others WatchResponse messages. Stops at a record cut short.
 */
async function journaledIds(dir: string): Promise<Set<string>> {
  const found = new Set<string>();
  for (const file of await journals(dir)) {
    const data = await readFile(join(dir, file));
    for (let offset = 0, index = 0; offset + 8 <= data.length; index++) {
      const end = offset + 8 + data.readUInt32BE(offset);
      if (end > data.length) break;
      if (index > 0) {
        for (const u of v1.WatchResponse.fromBinary(data.subarray(offset + 8, end)).updates)
          found.add(u.relationship!.resource!.objectId);
      }
      offset = end;
    }
  }
  return found;
}

/** Byte offsets of each record in a journal file. */
function recordOffsets(data: Buffer): number[] {
  const offsets: number[] = [];
  for (let offset = 0; offset + 8 <= data.length; offset += 8 + data.readUInt32BE(offset))
    offsets.push(offset);
  return offsets;
}

describe("the local SpiceDB keeps its relationships in a data directory", () => {
  it("brings back every relationship after a clean close: caveats with their context, expirations, deletes and replacements", async () => {
    const dir = await freshDir();
    // Holds the journal's Watch messages back once armed, until the server, closing, commits a revision after every
    // write of the test: so the close starts with acknowledged writes not journaled yet, and must wait for them.
    let holding:
      | { after: bigint; closing: boolean; release: () => void; released: Promise<void> }
      | undefined;
    const first = await open(dir, {
      persistenceHooks: {
        onWatchMessage: (message) => {
          if (!holding) return undefined;
          const { changesThrough } = v1.WatchResponse.fromBinary(message);
          if (holding.closing && changesThrough && revisionOf(changesThrough.token) > holding.after)
            holding.release();
          return holding.released;
        },
      },
    });
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
    const before = await state(first.client);
    let release = () => {};
    const released = new Promise<void>((resolve) => {
      release = resolve;
    });
    holding = { after: 0n, closing: false, release, released };
    const bulk = Array.from({ length: 50 }, (_, i) => rel(`doc:bulk${i}`, "owner", "alice"));
    const written = await Promise.all(bulk.map((r) => first.client.promises.writeRelationships(touch(r))));
    for (const w of written)
      if (revisionOf(w.writtenAt!.token) > holding.after) holding.after = revisionOf(w.writtenAt!.token);
    holding.closing = true;
    await first.close();

    const second = await open(dir);
    const after = await state(second.client);
    expect(after).toEqual([...before, ...bulk.map((r) => JSON.stringify(v1.Relationship.toJson(r)))].sort());
    expect(before).toHaveLength(5);
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

  it("does not bring back relationships that expired while it was down, from a snapshot or from the journal", async () => {
    const dir = await freshDir();
    const first = await open(dir);
    const soon = Date.now() + 1_500;
    await first.client.promises.writeRelationships(
      touch(rel("doc:d1", "owner", "alice"), rel("doc:d1", "reader", "dan", { expiresAt: soon })),
    );
    await first.server.persistence!.compact(); // dan is in the snapshot
    await first.client.promises.writeRelationships(
      touch(rel("doc:d1", "reader", "erin", { expiresAt: soon })),
    );
    expect(await canRead(first.client, "d1", "erin")).toBe(true); // erin is in the journal
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

  it("after kill -9 of a real server process, restarts with every write journaled before the kill and a prefix of the rest", async () => {
    const dataDir = await freshDir();
    const port = await freePort();
    const endpoint = `127.0.0.1:${port}`;
    const start = () =>
      startSpiceDBLocalProcess({
        port,
        env: {
          PATH: process.env.PATH,
          DATA_DIR: dataDir,
          SPICEDB_PRESHARED_KEY: KEY,
          SPICEDB_SCHEMA_FILE: SCHEMA,
          LOG_LEVEL: "warn",
        },
      });
    let child = await start();
    let client = v1.NewClient(KEY, endpoint, v1.ClientSecurity.INSECURE_PLAINTEXT_CREDENTIALS);
    for (let i = 0; i < 40; i++)
      await client.promises.writeRelationships(touch(rel(`doc:a${i}`, "owner", "alice")));
    const journalDir = join(dataDir, "spicedb");
    await waitFor(
      async () => (await journaledIds(journalDir)).has("a39"),
      "the first writes reach the journal file",
    );
    for (let i = 0; i < 40; i++)
      await client.promises.writeRelationships(touch(rel(`doc:b${i}`, "owner", "alice")));
    const exited = new Promise((r) => child.process.once("exit", r));
    child.process.kill("SIGKILL");
    await exited;
    client.close();

    child = await start();
    client = v1.NewClient(KEY, endpoint, v1.ClientSecurity.INSECURE_PLAINTEXT_CREDENTIALS);
    const restored = ids(await state(client));
    expect(restored.filter((id) => id.startsWith("a")).sort()).toEqual(
      Array.from({ length: 40 }, (_, i) => `a${i}`).sort(),
    );
    // Writes were acknowledged one after another, so whatever survived is a prefix of them.
    const b = restored.filter((id) => id.startsWith("b")).map((id) => Number(id.slice(1)));
    expect(b.sort((x, y) => x - y)).toEqual(Array.from({ length: b.length }, (_, i) => i));
    client.close();
    await child.stop();
  });

  it("starts from a journal whose last record was cut short, logs what it dropped, and appends after it", async () => {
    const dir = await freshDir();
    const first = await open(dir);
    for (const id of ["t1", "t2", "t3"])
      await first.client.promises.writeRelationships(touch(rel(`doc:${id}`, "owner", "alice")));
    await first.close();
    const [journal] = await journals(dir);
    const path = join(dir, journal!);
    const size = (await stat(path)).size;
    await truncate(path, size - 5); // kill -9 in the middle of the last record

    const second = await open(dir);
    expect(ids(await state(second.client))).toEqual(["t1", "t2"]);
    const dropped = second.log.lines.find((l) => l.level === "warn");
    expect(dropped?.message).toMatch(/cut short/);
    expect(dropped?.fields).toMatchObject({
      file: path,
      droppedBytes: size - 5 - (dropped?.fields.offset as number),
    });
    await second.client.promises.writeRelationships(touch(rel("doc:t4", "owner", "alice")));
    await second.close();

    const third = await open(dir);
    expect(ids(await state(third.client))).toEqual(["t1", "t2", "t4"]);
    expect(third.log.lines.filter((l) => l.level !== "info")).toEqual([]);
    await third.close();
  });

  it("stops replaying at a damaged record, keeps a copy of the journal, and starts with what came before it", async () => {
    const dir = await freshDir();
    const first = await open(dir);
    for (const id of ["c1", "c2", "c3", "c4"])
      await first.client.promises.writeRelationships(touch(rel(`doc:${id}`, "owner", "alice")));
    await first.close();
    const [journal] = await journals(dir);
    const path = join(dir, journal!);
    const original = await readFile(path);
    const damaged = Buffer.from(original);
    const third = recordOffsets(damaged)[3]!; // records: header, c1, c2, c3, c4
    damaged[third + 12]! ^= 0xff;
    await writeFile(path, damaged);

    const second = await open(dir);
    expect(ids(await state(second.client))).toEqual(["c1", "c2"]);
    const error = second.log.lines.find((l) => l.level === "error");
    expect(error?.message).toMatch(/checksum/);
    expect(await readFile(`${path}.damaged`)).toEqual(damaged);
    await second.close();
  });

  it("compacts: a snapshot at one exact revision replaces the journal, and writes made meanwhile land in the new journal", async () => {
    const dir = await freshDir();
    let during: (() => Promise<void>) | undefined;
    const first = await open(dir, {
      persistenceHooks: { beforeSnapshotRead: () => during?.() ?? Promise.resolve() },
    });
    for (let i = 0; i < 150; i++) {
      await first.client.promises.writeRelationships(
        touch(rel(`doc:k${i}`, "reader", "*", { caveat: { resource_org: `org${i}` } })),
      );
    }
    for (let i = 0; i < 50; i++)
      await first.client.promises.writeRelationships(remove(rel(`doc:k${i}`, "reader", "*")));
    const [journal] = await journals(dir);
    const journalBefore = (await stat(join(dir, journal!))).size;
    // After the switch to a new journal, before the snapshot is read: these must end up exactly once.
    during = async () => {
      await first.client.promises.writeRelationships(touch(rel("doc:meanwhile", "owner", "alice")));
      await first.client.promises.writeRelationships(remove(rel("doc:k60", "reader", "*")));
    };
    await first.server.persistence!.compact();
    during = undefined;

    const after = await files(dir);
    const snapshots = after.filter((f) => f.startsWith("snapshot."));
    expect(snapshots).toHaveLength(1);
    expect(after).not.toContain(journal);
    const [newJournal] = await journals(dir);
    expect(newJournal).toBe(snapshots[0]!.replace("snapshot", "journal"));
    expect((await stat(join(dir, newJournal!))).size).toBeLessThan(journalBefore / 20);
    const before = await state(first.client);
    expect(ids(before)).toContain("meanwhile");
    expect(ids(before)).not.toContain("k60");
    await first.close();

    const second = await open(dir);
    expect(await state(second.client)).toEqual(before);
    expect(before).toHaveLength(100 - 1 + 1);
    await second.close();
  });

  it("compacts on its own once the journal outgrows the snapshot threshold", async () => {
    const dir = await freshDir();
    const first = await open(dir, { snapshotAfterBytes: 4096 });
    for (let i = 0; i < 120; i++)
      await first.client.promises.writeRelationships(touch(rel(`doc:g${i}`, "owner", "alice")));
    await waitFor(
      async () => (await files(dir)).some((f) => /^snapshot\.\d+$/.test(f)),
      "a snapshot is written",
    );
    const before = await state(first.client);
    await first.close();
    const seq = (f: string) => Number(f.split(".")[1]);
    const snapshot = (await files(dir)).filter((f) => /^snapshot\.\d+$/.test(f)).map(seq);
    expect(Math.min(...(await journals(dir)).map(seq))).toBeGreaterThanOrEqual(Math.max(...snapshot));

    const second = await open(dir);
    expect(await state(second.client)).toEqual(before);
    expect(before).toHaveLength(120);
    await second.close();
  });

  it("journals a write committed between the replay and the opening of its Watch", async () => {
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
    await expect(open(dir)).rejects.toThrow(/in use by process/);
    await first.close();
    const again = await open(dir);
    await again.close();
  });

  it("refuses writes once the journal cannot be written, and still answers reads", async () => {
    const dir = await freshDir();
    const first = await open(dir);
    await first.client.promises.writeRelationships(touch(rel("doc:d1", "owner", "alice")));
    const [journal] = await journals(dir);
    const next = `journal.${String(Number(journal!.split(".")[1]) + 1).padStart(8, "0")}`;
    await mkdir(join(dir, next)); // the journal a compaction switches to cannot be opened
    await first.server.persistence!.compact().catch(() => {});
    await expect(
      first.client.promises.writeRelationships(touch(rel("doc:d2", "owner", "alice"))),
    ).rejects.toMatchObject({ code: grpc.status.UNAVAILABLE });
    expect(await canRead(first.client, "d1", "alice")).toBe(true);
    expect(
      first.log.lines.some((l) => l.level === "error" && /journal cannot be written/.test(l.message)),
    ).toBe(true);
    await first.close();
  });
});
