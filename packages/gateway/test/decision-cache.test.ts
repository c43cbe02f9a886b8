import { randomBytes } from "node:crypto";
import {
  DECISION_CACHE_INVALIDATIONS,
  DECISION_CACHE_LOOKUPS,
  DecisionCache,
  type DecisionCacheMetrics,
  EXPIRY_CLOCK_MARGIN_MS,
  type GrantExpiries,
  PostgresGrantExpiries,
  RedisConsistencyTokens,
  ResourceAuthorization,
  resourceFilter,
  SpiceDBClient,
  v1,
} from "@gw/core/authz";
import { ManualClock } from "@gw/core/clock";
import { McpToolAuthorization } from "@gw/core/mcp";
import { createPostgres, type Postgres } from "@gw/core/postgres";
import type { Principal } from "@gw/core/principal";
import { type RunningSpiceDBLocal, startSpiceDBLocal } from "@gw/spicedb-local";
import { scanKeys, socketWritesDuring, useTestDatabase, useTestRedis } from "@gw/test-kit";
import { pastRecentWindow } from "@gw/test-kit/zedtokens";
import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from "vitest";

/** CheckPermission calls the SpiceDB server received: a decision served from the cache adds none. */
let checksAsked = 0;
let spicedb: RunningSpiceDBLocal;
let client: SpiceDBClient;
/** Where every replica records and reads the ends of grants: the platform's database. */
const database = useTestDatabase();
let db: Postgres;
let expiries: GrantExpiries;

beforeAll(async () => {
  spicedb = await startSpiceDBLocal({
    host: "127.0.0.1",
    port: 0,
    presharedKey: "k",
    schemaFile: new URL("../../../spicedb/schema.zed", import.meta.url).pathname,
    observe: (path) => {
      if (path.endsWith("/CheckPermission")) checksAsked++;
    },
  });
  client = new SpiceDBClient({
    endpoint: spicedb.endpoint,
    presharedKey: "k",
    insecure: true,
    deadlineMs: 2_000,
  });
  db = createPostgres(database.url, { connectionName: "decision-cache-test" });
  expiries = new PostgresGrantExpiries(db);
});
afterAll(async () => {
  await db.close();
  client.close();
  await spicedb.close();
});

const principal = (user: string): Principal => ({
  org: "acme",
  user,
  keyId: "k",
  permissions: [],
  credential: "api_key",
  onBehalfOf: true,
});
/**
 * How long the tests' expiring grants last: under the replicas' 5 s bound on a decision's age, so that the grant's
 * end is what bounds it, and as long as that allows. SpiceDB ends a grant on its own real clock, and the checks
 * right after a grant expect it to hold: a loaded machine must not spend it between the grant and those checks
 * (one test then waits it out, to see SpiceDB end it).
 */
const GRANT_MS = 4_500;

const alice = principal("alice");
const bob = principal("bob");

/** What the cache counted, by outcome and reason. */
function tally(): DecisionCacheMetrics & { counts: Record<string, number> } {
  const counts: Record<string, number> = Object.fromEntries(
    [...DECISION_CACHE_LOOKUPS, ...DECISION_CACHE_INVALIDATIONS].map((k) => [k, 0]),
  );
  return {
    counts,
    lookup: (outcome) => counts[outcome]!++,
    invalidated: (reason) => counts[reason]!++,
  };
}

// Redis holds only the ZedTokens here, tested on a Redis Cluster in consistency.test.ts: one server suffices.
describe.each(["single"] as const)("the decision cache, on %s Redis", (topology) => {
  const store = useTestRedis(topology);
  /** The cache's clock, moved by the test; its wall time starts at the real time, as SpiceDB's expirations do. */
  let clock: ManualClock;
  let metrics: ReturnType<typeof tally>;
  /** Two replicas on one Redis and one SpiceDB, each with its own cache. */
  let a: ResourceAuthorization;
  let b: ResourceAuthorization;
  const replica = (recentWriteMs: number, counted?: DecisionCacheMetrics) =>
    new ResourceAuthorization(client, new RedisConsistencyTokens(store.redis, recentWriteMs, clock), {
      expiries,
      decisions: new DecisionCache({
        maxEntries: 1_000,
        maxAgeMs: 5_000,
        clock,
        ...(counted ? { metrics: counted } : {}),
      }),
    });
  let n = 0;
  const fresh = () => ({ type: "conversation" as const, id: `conv_${topology}_${++n}_${Date.now()}` });
  const tokenAt = (id: string) => `gw:zedtoken:{conversation:acme/${id}}`;

  beforeEach(() => {
    clock = new ManualClock();
    metrics = tally();
  });

  /** Asks `replica` and says whether SpiceDB was asked for it. */
  async function asked(replica: ResourceAuthorization, ...args: Parameters<ResourceAuthorization["check"]>) {
    const before = checksAsked;
    const allowed = await replica.check(...args);
    return { allowed, asked: checksAsked - before };
  }

  it("answers a repeated check from the cache; a revoke on another replica is seen by the very next check", async () => {
    // Without the "recent" window, checks use the cache right after a write.
    [a, b] = [replica(0, metrics), replica(0)];
    const resource = fresh();
    await b.createOwnership(alice, resource);
    await b.grant(alice, { ...resource, userId: "bob", role: "reader" });

    expect(await asked(a, bob, resource, "reader")).toEqual({ allowed: true, asked: 1 });
    expect(await asked(a, bob, resource, "reader")).toEqual({ allowed: true, asked: 0 });
    expect(await asked(a, bob, resource, "writer")).toEqual({ allowed: false, asked: 1 });
    expect(await asked(a, bob, resource, "writer")).toEqual({ allowed: false, asked: 0 });
    expect(metrics.counts).toMatchObject({ hit: 2, miss: 2, write: 0 });

    await b.revoke(alice, { ...resource, userId: "bob", role: "reader" });
    expect(await asked(a, bob, resource, "reader")).toEqual({ allowed: false, asked: 1 });
    expect(metrics.counts).toMatchObject({ hit: 2, miss: 3, write: 1 });
    // And a grant is seen as soon: the kept denial goes too.
    await b.grant(alice, { ...resource, userId: "bob", role: "writer" });
    expect(await asked(a, bob, resource, "writer")).toEqual({ allowed: true, asked: 1 });
    expect(metrics.counts.write).toBe(2);
  });

  it("is not used right after a write (fully consistent then); afterwards it is", async () => {
    [a, b] = [replica(2_000, metrics), replica(2_000)];
    const resource = fresh();
    await b.createOwnership(alice, resource);
    expect(await asked(a, alice, resource, "owner")).toEqual({ allowed: true, asked: 1 });
    expect(await asked(a, alice, resource, "owner")).toEqual({ allowed: true, asked: 1 });
    expect(metrics.counts).toMatchObject({ bypass: 2, hit: 0 });

    // The window passes (Redis says so from the key's own expiry), and the replica has had Redis that long.
    await pastRecentWindow(store.redis, tokenAt(resource.id));
    clock.advance(2_000);
    expect(await asked(a, alice, resource, "owner")).toEqual({ allowed: true, asked: 1 });
    expect(await asked(a, alice, resource, "owner")).toEqual({ allowed: true, asked: 0 });
    expect(metrics.counts).toMatchObject({ bypass: 2, miss: 1, hit: 1 });
  });

  it("keeps a decision no longer than its maximum age", async () => {
    a = replica(0, metrics);
    const resource = fresh();
    await a.createOwnership(alice, resource);
    expect((await asked(a, alice, resource, "owner")).asked).toBe(1);
    clock.advance(4_999);
    expect((await asked(a, alice, resource, "owner")).asked).toBe(0);
    clock.advance(1);
    expect(await asked(a, alice, resource, "owner")).toEqual({ allowed: true, asked: 1 });
    expect(metrics.counts).toMatchObject({ max_age: 1, hit: 1, miss: 2 });
  });

  it("keeps no decision past the first expiry of a grant on the resource, however it was reached", async () => {
    [a, b] = [replica(0, metrics), replica(0)];
    const resource = fresh();
    await b.createOwnership(alice, resource);
    const expiresAt = new Date(clock.wall() + GRANT_MS);
    await b.grant(alice, { ...resource, userId: "bob", role: "reader", expiresAt });
    // Another user's decision on the resource is bounded too: the cache cannot tell what a decision rests on.
    for (const who of [bob, alice]) expect((await asked(a, who, resource, "reader")).allowed).toBe(true);
    clock.advance(GRANT_MS - EXPIRY_CLOCK_MARGIN_MS - 1);
    for (const who of [bob, alice]) expect((await asked(a, who, resource, "reader")).asked).toBe(0);
    clock.advance(1);
    for (const who of [bob, alice]) expect((await asked(a, who, resource, "reader")).asked).toBe(1);
    expect(metrics.counts).toMatchObject({ grant_expiry: 2, max_age: 0 });

    // Once SpiceDB has ended the grant, the check says so.
    while (Date.now() <= expiresAt.getTime() + 50) await new Promise((r) => setTimeout(r, 100));
    clock.advance(Date.now() - clock.wall());
    expect(await asked(a, bob, resource, "reader")).toEqual({ allowed: false, asked: 1 });
    // A later expiry on the resource still bounds what is kept now.
    await b.grant(alice, {
      ...resource,
      userId: "carol",
      role: "writer",
      expiresAt: new Date(clock.wall() + 60_000),
    });
    await b.grant(alice, {
      ...resource,
      userId: "dave",
      role: "reader",
      expiresAt: new Date(clock.wall() + 2_000),
    });
    await b.grant(alice, { ...resource, userId: "erin", role: "reader" });
    expect((await asked(a, bob, resource, "reader")).asked).toBe(1);
    clock.advance(2_000 - EXPIRY_CLOCK_MARGIN_MS);
    expect((await asked(a, bob, resource, "reader")).asked).toBe(1);
  });

  it("reads a grant's end from the database: Redis holds the resource's token alone", async () => {
    [a, b] = [replica(0, metrics), replica(0)];
    const resource = fresh();
    await b.createOwnership(alice, resource);
    await b.grant(alice, {
      ...resource,
      userId: "bob",
      role: "reader",
      expiresAt: new Date(clock.wall() + GRANT_MS),
    });
    expect(await scanKeys(store.redis, `${tokenAt(resource.id)}*`)).toEqual([tokenAt(resource.id)]);
    expect(await asked(a, bob, resource, "reader")).toEqual({ allowed: true, asked: 1 });
    expect(await asked(a, bob, resource, "reader")).toEqual({ allowed: true, asked: 0 });
    clock.advance(GRANT_MS - EXPIRY_CLOCK_MARGIN_MS);
    expect(await asked(a, bob, resource, "reader")).toEqual({ allowed: true, asked: 1 });
    expect(metrics.counts.grant_expiry).toBe(1);
  });

  it("keeps a denial but no allow when the ends of grants cannot be read", async () => {
    const unreachable = createPostgres("postgres://gw@127.0.0.1:1/none", {
      connectionName: "decision-cache-test",
      connectTimeoutMs: 1_000,
    });
    try {
      const blind = new ResourceAuthorization(client, new RedisConsistencyTokens(store.redis, 0, clock), {
        expiries: new PostgresGrantExpiries(unreachable),
        decisions: new DecisionCache({ maxEntries: 10, maxAgeMs: 5_000, clock, metrics }),
      });
      const resource = fresh();
      await blind.createOwnership(alice, resource);
      expect(await asked(blind, alice, resource, "owner")).toEqual({ allowed: true, asked: 1 });
      expect(await asked(blind, alice, resource, "owner")).toEqual({ allowed: true, asked: 1 });
      expect(await asked(blind, bob, resource, "reader")).toEqual({ allowed: false, asked: 1 });
      expect(await asked(blind, bob, resource, "reader")).toEqual({ allowed: false, asked: 0 });
    } finally {
      await unreachable.close();
    }
  });

  it.each([2_000, 0])(
    "drops a decision on a resource without a token when another replica deletes it (recent window %i ms)",
    async (recentWriteMs) => {
      [a, b] = [replica(recentWriteMs, metrics), replica(recentWriteMs)];
      const resource = fresh();
      await b.createOwnership(alice, resource);
      await b.grant(alice, { ...resource, userId: "bob", role: "reader" });
      // SPICEDB_ZEDTOKEN_TTL later its token has expired in Redis: the resource has none.
      await store.redis.del(tokenAt(resource.id));
      // Replica A has had Redis for the window: it trusts what Redis says (a process does only then).
      await a.check(alice, resource, "owner");
      clock.advance(recentWriteMs);
      // Without a token SpiceDB answers from its latest snapshot, which takes a moment to have the grant;
      // meanwhile each denial is kept, so the clock moves past it.
      while (!(await a.check(bob, resource, "reader"))) {
        clock.advance(5_000);
        await new Promise((r) => setTimeout(r, 100));
      }
      expect(await asked(a, bob, resource, "reader")).toEqual({ allowed: true, asked: 0 });

      // Alice deletes it on the other replica: the delete's token is the resource's now.
      const writes = metrics.counts.write!;
      await b.deleteResource(alice, resource);
      expect(await asked(a, bob, resource, "reader")).toEqual({ allowed: false, asked: 1 });
      // Also once the "recent" window has passed: the delete's token keeps the check at least as fresh.
      await pastRecentWindow(store.redis, tokenAt(resource.id));
      expect(await asked(a, bob, resource, "reader")).toEqual({
        allowed: false,
        asked: recentWriteMs ? 1 : 0,
      });
      expect(metrics.counts.write).toBe(writes + 1);
    },
  );

  it("keeps an MCP tool's decision under its server's token: a tool policy, a revoke and a grant's expiry on the server, made on another replica, are seen by the next call", async () => {
    [a, b] = [replica(0, metrics), replica(0)];
    const tokens = new RedisConsistencyTokens(store.redis, 0, clock);
    const [toolsA, toolsB] = [
      new McpToolAuthorization(client, tokens, a),
      new McpToolAuthorization(client, tokens, b),
    ];
    const server = { type: "mcp_server" as const, id: `mcp_${randomBytes(12).toString("hex")}` };
    await b.createOwnership(alice, server);
    await b.grant(alice, { ...server, userId: "bob", role: "reader" });
    await toolsB.setDefault("acme", server.id, "search", "reader");
    const mayCall = async (tools: McpToolAuthorization, who: Principal, tool = "search") => {
      const before = checksAsked;
      const allowed = await tools.mayCall(who, server.id, tool);
      return { allowed, asked: checksAsked - before };
    };
    expect(await mayCall(toolsA, bob)).toEqual({ allowed: true, asked: 1 });
    expect(await mayCall(toolsA, bob)).toEqual({ allowed: true, asked: 0 });
    // Another tool of the same server is a decision of its own.
    expect(await mayCall(toolsA, bob, "delete")).toEqual({ allowed: false, asked: 1 });

    await toolsB.setRole(alice, server.id, "search", "owner");
    expect(await mayCall(toolsA, bob)).toEqual({ allowed: false, asked: 1 });
    await toolsB.setRole(alice, server.id, "search", "reader");
    expect(await mayCall(toolsA, bob)).toEqual({ allowed: true, asked: 1 });
    await b.revoke(alice, { ...server, userId: "bob", role: "reader" });
    expect(await mayCall(toolsA, bob)).toEqual({ allowed: false, asked: 1 });

    const expiresAt = new Date(clock.wall() + GRANT_MS);
    await b.grant(alice, { ...server, userId: "bob", role: "reader", expiresAt });
    expect(await mayCall(toolsA, bob)).toEqual({ allowed: true, asked: 1 });
    expect((await mayCall(toolsA, bob)).asked).toBe(0);
    clock.advance(GRANT_MS - EXPIRY_CLOCK_MARGIN_MS);
    expect((await mayCall(toolsA, bob)).asked).toBe(1);
  });

  it("reads a server's last write once for an MCP call's server and tool checks asked together, and again for the next call", async () => {
    let reads = 0;
    const tokens = new RedisConsistencyTokens(store.redis, 0, clock);
    const counted = new Proxy(tokens, {
      get(target, property) {
        if (property === "get")
          return (...args: Parameters<typeof tokens.get>) => {
            reads++;
            return target.get(...args);
          };
        const value = Reflect.get(target, property, target) as unknown;
        return typeof value === "function" ? value.bind(target) : value;
      },
    });
    const authorization = new ResourceAuthorization(client, counted, {
      expiries,
      decisions: new DecisionCache({ maxEntries: 1_000, maxAgeMs: 5_000, clock }),
    });
    const tools = new McpToolAuthorization(client, counted, authorization);
    const server = { type: "mcp_server" as const, id: `mcp_${randomBytes(12).toString("hex")}` };
    await authorization.createOwnership(alice, server);
    await authorization.grant(alice, { ...server, userId: "bob", role: "reader" });
    await tools.setDefault("acme", server.id, "search", "reader");
    const call = () =>
      Promise.all([authorization.check(bob, server, "reader"), tools.mayCall(bob, server.id, "search")]);
    reads = 0;
    expect(await call()).toEqual([true, true]);
    expect(reads).toBe(1);
    expect(await call()).toEqual([true, true]);
    expect(reads).toBe(2);
    // A revoke between two calls is read by the next one.
    await authorization.revoke(alice, { ...server, userId: "bob", role: "reader" });
    expect(await call()).toEqual([false, false]);
  });

  it("does not serve a decision kept before Redis's connection broke, even once Redis is trusted again", async () => {
    // Without a window after a break, so only the decision's own session is tested here.
    a = replica(0, metrics);
    const resource = fresh();
    await a.createOwnership(alice, resource);
    expect(await asked(a, alice, resource, "owner")).toEqual({ allowed: true, asked: 1 });
    expect(await asked(a, alice, resource, "owner")).toEqual({ allowed: true, asked: 0 });

    // Redis keeps the resource's token through its restart: the decision's token still matches, its session
    // does not (a write made while Redis was away would have left no token to tell).
    await store.redis.save();
    await store.server.halt();
    await store.server.restart();
    await vi.waitFor(() => store.redis.ping(), { timeout: 15_000, interval: 50 });
    expect(await asked(a, alice, resource, "owner")).toEqual({ allowed: true, asked: 1 });
    expect(metrics.counts.redis_outage).toBe(1);
    expect(await asked(a, alice, resource, "owner")).toEqual({ allowed: true, asked: 0 });
  });

  it("is not used while Redis cannot say what the last write was", async () => {
    a = replica(0, metrics);
    const resource = fresh();
    await a.createOwnership(alice, resource);
    expect((await asked(a, alice, resource, "owner")).asked).toBe(1);
    const broken = new ResourceAuthorization(
      client,
      {
        get: () => Promise.reject(new Error("Redis is away")),
        set: () => Promise.resolve(),
        forget: () => Promise.resolve(),
        drop: () => Promise.resolve(),
      },
      { decisions: new DecisionCache({ maxEntries: 10, maxAgeMs: 5_000, clock, metrics }) },
    );
    for (let i = 0; i < 2; i++)
      expect(await asked(broken, alice, resource, "owner")).toEqual({ allowed: true, asked: 1 });
    expect(metrics.counts.bypass).toBe(2);
  });
  /**
   * The platform's database, behind a gate: a record waits for `release`
   * (then fails with `failure`, if set) and says when it was asked.
   */
  function heldExpiries(failure?: Error) {
    let release!: () => void;
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    let recordAsked!: () => void;
    const asked = new Promise<void>((resolve) => {
      recordAsked = resolve;
    });
    const held: GrantExpiries = {
      record: async (key, ends) => {
        recordAsked();
        await gate;
        if (failure) throw failure;
        await expiries.record(key, ends);
      },
      next: (key, after) => expiries.next(key, after),
      prune: (before) => expiries.prune(before),
    };
    return { held, release, asked };
  }

  /** `client`, telling each WriteRelationships it sends and each answer it gets. */
  function watchedWrites() {
    const events: string[] = [];
    let answered!: () => void;
    const firstAnswer = new Promise<void>((resolve) => {
      answered = resolve;
    });
    const watched = Object.create(client) as SpiceDBClient;
    watched.writeRelationships = async (request) => {
      events.push("sent");
      const response = await client.writeRelationships(request);
      events.push("answered");
      answered();
      return response;
    };
    return { watched, events, firstAnswer };
  }

  /** The resource's relationships as SpiceDB holds them now. */
  async function relationshipsOf(resource: { type: "conversation"; id: string }) {
    const read = await client.readRelationships(
      v1.ReadRelationshipsRequest.create({
        consistency: v1.Consistency.create({
          requirement: { oneofKind: "fullyConsistent", fullyConsistent: true },
        }),
        relationshipFilter: resourceFilter("acme", resource),
      }),
    );
    return read.map((r) => r.relationship?.relation).sort();
  }

  it("writes a fresh resource's owner beside the record of its end, and is done once both are", async () => {
    const { held, release, asked: recordAsked } = heldExpiries();
    const { watched, events, firstAnswer } = watchedWrites();
    const creator = new ResourceAuthorization(watched, new RedisConsistencyTokens(store.redis, 0, clock), {
      expiries: held,
      ownership: { lifetimes: { conversation: 60_000 } },
    });
    const resource = fresh();
    let done = false;
    const creating = creator.createOwnership(alice, resource).finally(() => {
      done = true;
    });
    await recordAsked;
    // The write lands while the end's record still waits; the creation does not end before the record.
    await firstAnswer;
    expect(events).toEqual(["sent", "answered"]);
    expect(await relationshipsOf(resource)).toEqual(["organization", "owner"]);
    expect(done).toBe(false);
    release();
    expect(await creating).toEqual(expect.any(String));
    const end = await expiries.next(`conversation:acme/${resource.id}`, clock.wall());
    expect(end).toBeGreaterThan(clock.wall());
  });

  it("records the end of a grant on a resource others may know before the grant is written", async () => {
    const { held, release, asked: recordAsked } = heldExpiries();
    const { watched, events } = watchedWrites();
    const granter = new ResourceAuthorization(watched, new RedisConsistencyTokens(store.redis, 0, clock), {
      expiries: held,
    });
    const resource = fresh();
    await granter.createOwnership(alice, resource);
    events.length = 0;
    const granting = granter.grant(alice, {
      ...resource,
      userId: "bob",
      role: "reader",
      expiresAt: new Date(clock.wall() + 60_000),
    });
    await recordAsked;
    // However long the record takes, nothing is sent before it is kept.
    for (let i = 0; i < 5; i++) await new Promise((resolve) => setImmediate(resolve));
    expect(events).toEqual([]);
    release();
    await granting;
    expect(events).toEqual(["sent", "answered"]);
  });

  it("takes back a fresh resource's owner whose end could not be recorded, and fails", async () => {
    const { held, release } = heldExpiries(new Error("PostgreSQL is away"));
    const { watched, firstAnswer } = watchedWrites();
    const creator = new ResourceAuthorization(watched, new RedisConsistencyTokens(store.redis, 0, clock), {
      expiries: held,
      ownership: { lifetimes: { conversation: 60_000 } },
    });
    const resource = fresh();
    const creating = creator.createOwnership(alice, resource);
    await firstAnswer;
    release();
    await expect(creating).rejects.toThrow("PostgreSQL is away");
    expect(await relationshipsOf(resource)).toEqual([]);
  });
  it("keeps a write's ZedTokens (the resource's and its organization's) in one write to Redis", async () => {
    const creator = new ResourceAuthorization(client, new RedisConsistencyTokens(store.redis, 0, clock));
    const resource = fresh();
    const writes = await socketWritesDuring(store.redis, () => creator.createOwnership(alice, resource));
    expect(writes).toBe(1);
    expect(await scanKeys(store.redis, `${tokenAt(resource.id)}*`)).toEqual([tokenAt(resource.id)]);
    expect(await store.redis.get("gw:zedtoken:{organization:acme}")).toBe(
      await store.redis.get(tokenAt(resource.id)),
    );
  });
});
