import { randomBytes } from "node:crypto";
import { Readable } from "node:stream";
import { RedisConsistencyTokens, ResourceAuthorization, type Role, SpiceDBClient } from "@gw/core/authz";
import { ManualClock } from "@gw/core/clock";
import { AppError } from "@gw/core/errors";
import { createPostgres, type Postgres } from "@gw/core/postgres";
import type { Principal } from "@gw/core/principal";
import { createRedis, type RedisClient } from "@gw/core/redis";
import { startTestRedis, startTestSpiceDB, useTestDatabase, useTestVectorDatabase } from "@gw/test-kit";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { wordVector } from "../../test/vector-stores.ts";
import type { Caller } from "../budgets/admit-model-call.ts";
import { Files } from "../files/files.ts";
import type { AttributeFilter } from "./attribute-filter.ts";
import type { Embedder } from "./ingestion/embedder.ts";
import { PgVectorIndex } from "./pgvector-index.ts";
import { searchVectorStores, type VectorSearch, type VectorSearchDeps } from "./search.ts";

/** SpiceDB calls by method, as the search made them. */
const calls = new Map<string, number>();
const counted = (client: SpiceDBClient): SpiceDBClient =>
  new Proxy(client, {
    get(target, name, receiver) {
      const value = Reflect.get(target, name, receiver);
      if (typeof value !== "function") return value;
      return (...args: unknown[]) => {
        calls.set(String(name), (calls.get(String(name)) ?? 0) + 1);
        return (value as (...a: unknown[]) => unknown).apply(target, args);
      };
    },
  });

let teardown: () => Promise<void>;
let authorization: ResourceAuthorization;
let files: Files;
let db: Postgres;
let index: PgVectorIndex;
const clock = new ManualClock();
const database = useTestDatabase();
const vectors = useTestVectorDatabase();
/** The stores' records: what a search asks before it reads the index. */
const stores = new Map<string, { org: string; expiresAt?: number }>();
const embedded: string[][] = [];
const embedder: Embedder = {
  async embed({ texts }) {
    embedded.push([...texts]);
    return { vectors: texts.map((t) => wordVector(t)), tokens: texts.length };
  },
};
let deps: VectorSearchDeps;

beforeAll(async () => {
  const [redisServer, spicedb] = await Promise.all([startTestRedis(), startTestSpiceDB()]);
  const redis: RedisClient = createRedis(redisServer.url, { connectionName: "test" });
  const client = new SpiceDBClient({
    endpoint: spicedb.endpoint,
    presharedKey: spicedb.presharedKey,
    insecure: true,
    deadlineMs: 5_000,
  });
  authorization = new ResourceAuthorization(counted(client), new RedisConsistencyTokens(redis, 6_000), {
    clock,
  });
  db = createPostgres(database.url, { connectionName: "test" });
  files = new Files(db, {
    clock,
    options: { maxBytes: 1 << 20, quotaBytes: 1 << 30, retentionMs: 30 * 86_400_000 },
  });
  index = new PgVectorIndex({ url: vectors.url, maxConnections: 1 });
  deps = {
    authorization,
    files,
    vectorIndex: index,
    embedder,
    embeddingModel: "text-embedding-3-small",
    vectorStores: {
      async searchable(org, ids) {
        return ids.filter((id) => {
          const store = stores.get(id);
          return store && store.org === org && (store.expiresAt ?? Infinity) > clock.wall();
        });
      },
    },
  };
  teardown = async () => {
    await index.close();
    await db.close();
    client.close();
    redis.disconnect();
    await Promise.all([redisServer.stop(), spicedb.close()]);
  };
}, 60_000);
afterAll(() => teardown());
beforeEach(() => {
  calls.clear();
  embedded.length = 0;
});

const as = (org: string, user: string): Principal => ({
  org,
  user,
  keyId: "key_1",
  permissions: [],
  credential: "api_key",
  onBehalfOf: user !== "backend",
});
const callerOf = (principal: Principal): Caller => ({
  principal,
  admission: undefined,
  requestsCounted: true,
});
const hex = () => randomBytes(16).toString("hex");

/** A new organization where alice owns a store; `grants` on the store. */
async function organization(storeGrants: [string, Role][] = []) {
  const org = `org-${randomBytes(4).toString("hex")}`;
  const alice = as(org, "alice");
  const store = `vs_${hex()}`;
  stores.set(store, { org });
  await authorization.createOwnership(alice, { type: "vector_store", id: store });
  for (const [userId, role] of storeGrants)
    await authorization.grant(alice, { type: "vector_store", id: store, userId, role });
  return { org, alice, store };
}

/** alice's file in the store: its chunks (one per text), its grants, its attributes. */
async function file(
  place: { org: string; alice: Principal; store: string },
  texts: string[],
  options: {
    grants?: [string, Role][];
    attributes?: Record<string, string | number | boolean>;
    expiresAt?: Date;
  } = {},
) {
  const id = `file_${hex()}`;
  const ref = { org: place.org, id };
  await files.stage(
    { ...ref, filename: `${id.slice(5, 11)}.txt`, contentType: "text/plain" },
    Readable.from([Buffer.from(texts.join("\n"))]),
  );
  const expiresAt = options.expiresAt ?? new Date(clock.wall() + 86_400_000);
  await files.complete(ref, { purpose: "assistants", expiresAt });
  await authorization.createOwnership(place.alice, { type: "file", id }, { expiresAt });
  for (const [userId, role] of options.grants ?? [])
    await authorization.grant(place.alice, { type: "file", id, userId, role });
  await index.replaceFile(
    { org: place.org, vectorStoreId: place.store, fileId: id },
    texts.map((text, i) => ({ index: i, text, tokenCount: 5, embedding: wordVector(text) })),
    options.attributes ?? {},
  );
  return { id, filename: `${id.slice(5, 11)}.txt` };
}

const search = (principal: Principal, request: Partial<VectorSearch> & { vectorStoreIds: string[] }) =>
  searchVectorStores(
    deps,
    callerOf(principal),
    { queries: ["apple orchard harvest"], maxResults: 10, ...request },
    new AbortController().signal,
  );
const filesOf = (results: { fileId: string }[]) => [...new Set(results.map((r) => r.fileId))].sort();

describe("a store shared with bob, with a private file and a shared one", () => {
  let place: Awaited<ReturnType<typeof organization>>;
  let secret: { id: string };
  let shared: { id: string; filename: string };
  beforeAll(async () => {
    place = await organization([["bob", "reader"]]);
    secret = await file(place, ["apple orchard harvest secret plans", "apple orchard merger"]);
    shared = await file(place, ["apple orchard harvest schedule", "weather report"], {
      grants: [["bob", "reader"]],
    });
  });

  it("bob finds only the shared file's chunks; alice finds both files", async () => {
    const bob = await search(as(place.org, "bob"), { vectorStoreIds: [place.store] });
    expect(filesOf(bob)).toEqual([shared.id]);
    expect(bob[0]).toMatchObject({
      fileId: shared.id,
      filename: shared.filename,
      text: "apple orchard harvest schedule",
    });
    expect(filesOf(await search(place.alice, { vectorStoreIds: [place.store] }))).toEqual(
      [secret.id, shared.id].sort(),
    );
  });

  it("the page of candidates is decided in one CheckBulkPermissions, never a check per file", async () => {
    calls.clear();
    await search(as(place.org, "bob"), { vectorStoreIds: [place.store] });
    // One for the store, one for the files of the one page of candidates.
    expect(calls.get("checkBulkPermissions")).toBe(2);
    expect(calls.get("checkPermission") ?? 0).toBe(0);
    expect(calls.get("lookupResources") ?? 0).toBe(0);
  });

  it("a revoke takes effect on the next search, with no re-indexing", async () => {
    const first = await file(place, ["apple orchard harvest revoked soon"], { grants: [["bob", "reader"]] });
    const bob = as(place.org, "bob");
    expect(filesOf(await search(bob, { vectorStoreIds: [place.store] }))).toContain(first.id);
    await authorization.revoke(place.alice, { type: "file", id: first.id, userId: "bob", role: "reader" });
    expect(filesOf(await search(bob, { vectorStoreIds: [place.store] }))).not.toContain(first.id);
  });

  it("a public reader of one file opens that file alone to everyone of the organization", async () => {
    const open = await file(place, ["apple orchard harvest public notes"], { grants: [["*", "reader"]] });
    await authorization.grant(place.alice, {
      type: "vector_store",
      id: place.store,
      userId: "carol",
      role: "reader",
    });
    expect(filesOf(await search(as(place.org, "carol"), { vectorStoreIds: [place.store] }))).toEqual([
      open.id,
    ]);
  });

  it("each user sees what that user may read: the key's owner's reads do not carry over to its end users", async () => {
    // `backend` (a key's owner) may read the private file; bob, an end user of its key, may not.
    await authorization.grant(place.alice, {
      type: "vector_store",
      id: place.store,
      userId: "backend",
      role: "reader",
    });
    await authorization.grant(place.alice, {
      type: "file",
      id: secret.id,
      userId: "backend",
      role: "reader",
    });
    expect(filesOf(await search(as(place.org, "backend"), { vectorStoreIds: [place.store] }))).toContain(
      secret.id,
    );
    expect(filesOf(await search(as(place.org, "bob"), { vectorStoreIds: [place.store] }))).not.toContain(
      secret.id,
    );
  });

  it("without reader on the store: 404, and nothing is embedded (charged) or searched", async () => {
    await expect(search(as(place.org, "dave"), { vectorStoreIds: [place.store] })).rejects.toBeInstanceOf(
      AppError,
    );
    expect(embedded).toEqual([]);
  });

  it("another organization sees nothing: the same ids are a 404 there", async () => {
    const other = as(`org-${randomBytes(4).toString("hex")}`, "alice");
    await expect(search(other, { vectorStoreIds: [place.store] })).rejects.toMatchObject({
      code: "not_found",
    });
    expect(embedded).toEqual([]);
  });

  it("a file past its expiry is gone from the next search at once, before any sweep", async () => {
    const soon = await file(place, ["apple orchard harvest expiring"], {
      grants: [["bob", "reader"]],
      expiresAt: new Date(clock.wall() + 60_000),
    });
    const bob = as(place.org, "bob");
    expect(filesOf(await search(bob, { vectorStoreIds: [place.store] }))).toContain(soon.id);
    clock.advance(61_000);
    expect(filesOf(await search(bob, { vectorStoreIds: [place.store] }))).not.toContain(soon.id);
    expect(filesOf(await search(place.alice, { vectorStoreIds: [place.store] }))).not.toContain(soon.id);
  });

  it("an expired store is a 404", async () => {
    const gone = await organization([["bob", "reader"]]);
    stores.get(gone.store)!.expiresAt = clock.wall() - 1;
    await expect(search(as(gone.org, "bob"), { vectorStoreIds: [gone.store] })).rejects.toMatchObject({
      code: "not_found",
    });
  });
});

describe("filters and ranking", () => {
  let place: Awaited<ReturnType<typeof organization>>;
  let red: { id: string };
  let blue: { id: string };
  beforeAll(async () => {
    place = await organization([["bob", "reader"]]);
    red = await file(place, ["apple orchard harvest red"], {
      attributes: { color: "red", year: 2024 },
      grants: [["bob", "reader"]],
    });
    blue = await file(place, ["apple orchard harvest blue"], {
      attributes: { color: "blue", year: 2025 },
      grants: [["bob", "reader"]],
    });
    await file(place, ["apple orchard harvest green"], { attributes: { color: "green", year: 2025 } });
  });

  it.each<[string, AttributeFilter, () => string[]]>([
    ["eq", { type: "eq", key: "color", value: "red" }, () => [red.id]],
    ["gte", { type: "gte", key: "year", value: 2025 }, () => [blue.id]],
    [
      "or",
      {
        type: "or",
        filters: [
          { type: "eq", key: "color", value: "red" },
          { type: "eq", key: "color", value: "green" },
        ],
      },
      () => [red.id],
    ],
  ])("a %s filter applies to the files bob may read", async (_name, filter, expected) => {
    const results = await search(as(place.org, "bob"), { vectorStoreIds: [place.store], filter });
    expect(filesOf(results)).toEqual(expected().sort());
  });

  it("several queries: each chunk once, with its best score, best first", async () => {
    const results = await search(place.alice, {
      vectorStoreIds: [place.store],
      queries: ["red", "blue harvest"],
    });
    expect(new Set(results.map((r) => `${r.fileId}#${r.chunkIndex}`)).size).toBe(results.length);
    expect(results.map((r) => r.score)).toEqual([...results.map((r) => r.score)].sort((a, b) => b - a));
    expect(results[0]!.fileId).toBe(blue.id);
  });

  it("score_threshold leaves out chunks scoring less", async () => {
    const all = await search(place.alice, { vectorStoreIds: [place.store], queries: ["red"] });
    const threshold = (all[0]!.score + all[1]!.score) / 2;
    const kept = await search(place.alice, {
      vectorStoreIds: [place.store],
      queries: ["red"],
      scoreThreshold: threshold,
    });
    expect(kept.map((r) => r.fileId)).toEqual([red.id]);
  });
});

describe("a store where bob may read one file in ten, the nearest ones unreadable", () => {
  let place: Awaited<ReturnType<typeof organization>>;
  const readable: string[] = [];
  beforeAll(async () => {
    place = await organization([["bob", "reader"]]);
    // The unreadable files match the query best; the readable ones less well.
    for (let i = 0; i < 60; i++) {
      const mine = i % 10 === 0;
      const text = mine ? `apple notes ${i}` : `apple orchard harvest ${i}`;
      const made = await file(place, [text, `${text} again`], mine ? { grants: [["bob", "reader"]] } : {});
      if (mine) readable.push(made.id);
    }
  }, 120_000);

  it("returns max_num_results readable chunks, not the nearest ten less the unreadable", async () => {
    calls.clear();
    const results = await search(as(place.org, "bob"), { vectorStoreIds: [place.store], maxResults: 10 });
    expect(results).toHaveLength(10);
    for (const result of results) expect(readable).toContain(result.fileId);
    // Decided in bulk: one call for the store and a few pages of files, never one a file.
    expect(calls.get("checkPermission") ?? 0).toBe(0);
    expect(calls.get("checkBulkPermissions")!).toBeLessThanOrEqual(4);
  });

  it("returns every readable chunk when fewer than asked exist", async () => {
    const results = await search(as(place.org, "bob"), { vectorStoreIds: [place.store], maxResults: 50 });
    expect(results).toHaveLength(readable.length * 2);
  });
});
