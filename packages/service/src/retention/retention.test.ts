import { RedisConsistencyTokens, SpiceDBClient, scopedId, v1 } from "@gw/core/authz";
import { ManualClock } from "@gw/core/clock";
import { createLogger } from "@gw/core/logger";
import { readRelationshipLines, scanKeys } from "@gw/test-kit";
import pg from "pg";
import { beforeEach, describe, expect, it } from "vitest";
import { useStack } from "../../test/stack.ts";
import { RetentionSweeper, SWEEP_BATCH, SWEEP_LOCK } from "./sweeper.ts";

const RESPONSES = "/api/v1/llm/responses";
const CONV = "/api/v1/llm/conversations";
const COMPLETIONS = "/api/v1/llm/chat/completions";

/** The service's clock: moved by the tests, never slept on. */
const clock = new ManualClock();
const stack = useStack(
  { RESPONSE_RETENTION: "5s", CONVERSATION_IDLE_EXPIRY: "1h", RETENTION_SWEEP_INTERVAL: "1h" },
  {},
  undefined,
  "single",
  { clock },
);
/**
 * SpiceDB ends owners' and grants' relationships on its own (real) clock; the service's may run ahead of it,
 * never behind. It runs ten minutes ahead: what ends 5 s after it is stored, on the service's clock, ends
 * in SpiceDB only after the test, however slow the machine (a test that took more than 5 s of real time
 * between storing a response and reading its relationships found them gone).
 */
const AHEAD_OF_SPICEDB_MS = 10 * 60_000;
beforeEach(() => clock.advance(Math.max(0, Date.now() + AHEAD_OF_SPICEDB_MS - clock.wall())));

/** Every relationship of a resource, as `zed relationship read` shows them. */
const relationships = (type: string, org: string, id: string) =>
  readRelationshipLines(stack.spicedb, { resourceType: type, optionalResourceId: scopedId(org, id) });

/** A resource's ZedToken in Redis, and how many seconds it has left. */
async function zedToken(type: string, org: string, id: string) {
  const key = `gw:zedtoken:{${type}:${scopedId(org, id)}}`;
  const [token, ttl] = await Promise.all([stack.redis.get(key), stack.redis.ttl(key)]);
  return { token, ttl };
}

async function rowCount(sql: string, values: unknown[]): Promise<number> {
  return Number((await stack.db.query<{ n: string }>(sql, values)).rows[0]!.n);
}

async function grant(secret: string, resourceType: string, resourceId: string, userId: string) {
  const res = await stack.call(secret, "/api/v1/authorization/llm/grant", {
    json: { resourceType, resourceId, userId, role: "reader" },
    user: "alice",
  });
  expect(res.status).toBe(204);
}

describe("RESPONSE_RETENTION=5s", () => {
  it("a response is 404 for everyone once expired; the sweep then deletes its rows and relationships, nothing of it left in Redis", async () => {
    const key = await stack.createKey();
    const created = await stack.call(key.secret, RESPONSES, { json: { input: "keep me" }, user: "alice" });
    expect(created.status).toBe(200);
    const { id, output } = await created.json();
    const answer = output[0].id as string;
    await grant(key.secret, "response", id, "bob");
    const read = (user: string, path = "") => stack.call(key.secret, `${RESPONSES}/${id}${path}`, { user });
    expect((await read("alice")).status).toBe(200);
    const written = await zedToken("response", key.org, id);
    expect(written.token).toEqual(expect.any(String));

    clock.advance(4_000);
    expect((await read("alice")).status).toBe(200);
    clock.advance(1_500);
    // Expired: gone from every read at once, before any sweep.
    for (const user of ["alice", "bob"]) {
      expect((await read(user)).status).toBe(404);
      expect((await read(user, "/input_items")).status).toBe(404);
    }
    const chained = await stack.call(key.secret, RESPONSES, {
      json: { input: "more", previous_response_id: id },
      user: "alice",
    });
    expect(chained.status).toBe(404);
    const referenced = await stack.call(key.secret, RESPONSES, {
      json: {
        input: [
          { type: "item_reference", id: answer },
          { role: "user", content: "more" },
        ],
      },
      user: "alice",
    });
    expect(referenced.status).toBe(404);
    // A response stored now is not expired, and the sweep leaves it alone.
    const fresh = await (
      await stack.call(key.secret, RESPONSES, { json: { input: "new" }, user: "alice" })
    ).json();
    expect(await relationships("response", key.org, id)).toEqual([
      `organization ${key.org}`,
      `owner ${scopedId(key.org, "alice")}`,
      `reader ${scopedId(key.org, "bob")}`,
    ]);

    const report = await stack.sweep();
    expect(report?.responses).toBeGreaterThanOrEqual(1);
    expect(
      await rowCount(
        `SELECT (SELECT count(*) FROM responses WHERE org = $1 AND id = $2)
              + (SELECT count(*) FROM response_items WHERE org = $1 AND response_id = $2) AS n`,
        [key.org, id],
      ),
    ).toBe(0);
    expect(await relationships("response", key.org, id)).toEqual([]);
    // Nothing is written for a deleted resource: its ZedToken (and every key beside it) is gone, not renewed.
    expect(await scanKeys(stack.redis, `gw:zedtoken:{response:${scopedId(key.org, id)}}*`)).toEqual([]);
    // Decisions kept under the old token no longer match; the organization's token is the delete's.
    expect(written.token).toEqual(expect.any(String));
    const organization = await stack.redis.get(`gw:zedtoken:{organization:${key.org}}`);
    expect(organization).toEqual(expect.any(String));
    expect(organization).not.toBe(written.token);

    expect((await read("alice")).status).toBe(404);
    expect((await stack.call(key.secret, `${RESPONSES}/${fresh.id}`, { user: "alice" })).status).toBe(200);
    expect(await relationships("response", key.org, fresh.id)).toEqual([
      `organization ${key.org}`,
      `owner ${scopedId(key.org, "alice")}`,
    ]);

    // When its grants end was kept in PostgreSQL, beside the content: a sweep a minute after they ended drops it.
    const ends = (responseId: string) =>
      rowCount("SELECT count(*) AS n FROM authz_grant_expiries WHERE resource_key = $1", [
        `response:${scopedId(key.org, responseId)}`,
      ]);
    expect(await ends(id)).toBe(1);
    clock.advance(60_000);
    expect((await stack.sweep())?.grantExpiries).toBeGreaterThanOrEqual(1);
    expect(await ends(id)).toBe(0);
  });

  it("a stored chat completion is 404 for everyone once expired; the sweep then deletes its row and relationships", async () => {
    const key = await stack.createKey();
    const store = async (content: string) => {
      const res = await stack.call(key.secret, COMPLETIONS, {
        json: { messages: [{ role: "user", content }], store: true },
        user: "alice",
      });
      expect(res.status).toBe(200);
      return ((await res.json()) as { id: string }).id;
    };
    const id = await store("keep me");
    await grant(key.secret, "completion", id, "bob");
    const as = (user: string, path = "", init: { method?: string; json?: unknown } = {}) =>
      stack.call(key.secret, `${COMPLETIONS}${path}`, { ...init, user }).then((r) => r.status);
    expect(await as("bob", `/${id}`)).toBe(200);
    expect(await as("bob", `/${id}/messages`)).toBe(200);

    clock.advance(5_500);
    // Expired: gone from every read and change at once, before any sweep.
    for (const user of ["alice", "bob"]) {
      expect(await as(user, `/${id}`)).toBe(404);
      expect(await as(user, `/${id}/messages`)).toBe(404);
    }
    expect(await as("alice", `/${id}`, { json: { metadata: { x: "y" } } })).toBe(404);
    const fresh = await store("new");
    const listed = await stack.call(key.secret, COMPLETIONS, { user: "alice" });
    expect((await listed.json()).data.map((c: { id: string }) => c.id)).toEqual([fresh]);

    const report = await stack.sweep();
    expect(report?.completions).toBeGreaterThanOrEqual(1);
    const rows = (completion: string) =>
      rowCount("SELECT count(*) AS n FROM chat_completions WHERE org = $1 AND id = $2", [
        key.org,
        completion,
      ]);
    expect(await rows(id)).toBe(0);
    expect(await relationships("completion", key.org, id)).toEqual([]);
    expect(await rows(fresh)).toBe(1);
    expect(await relationships("completion", key.org, fresh)).toEqual([
      `organization ${key.org}`,
      `owner ${scopedId(key.org, "alice")}`,
    ]);
    expect(await as("alice", `/${fresh}/messages`)).toBe(200);
  });

  it("deletes relationships in bulk: one WriteRelationships per batch, no DeleteRelationships, and writes nothing for what it deleted", async () => {
    const org = `org-bulk-${clock.wall()}`;
    const count = SWEEP_BATCH * 2 + 3;
    const ids = Array.from({ length: count }, (_, n) => `resp_bulk${n}`);
    await stack.db.query(
      `INSERT INTO responses (org, id, body, input, stored_at)
       SELECT $1, id, '{}'::json, '[]'::json, $2 FROM unnest($3::text[]) AS id`,
      [org, new Date(clock.wall() - 10_000), ids],
    );
    // Each with its owner, and every tenth with a reader and a grant expiry in Redis too.
    const zed = v1.NewClient(
      stack.spicedb.presharedKey,
      stack.spicedb.endpoint,
      v1.ClientSecurity.INSECURE_PLAINTEXT_CREDENTIALS,
    );
    const relationship = (id: string, relation: string, user: string) =>
      v1.RelationshipUpdate.create({
        operation: v1.RelationshipUpdate_Operation.TOUCH,
        relationship: v1.Relationship.create({
          resource: v1.ObjectReference.create({ objectType: "response", objectId: scopedId(org, id) }),
          relation,
          subject: v1.SubjectReference.create({
            object: v1.ObjectReference.create({ objectType: "user", objectId: scopedId(org, user) }),
          }),
        }),
      });
    const updates = ids.flatMap((id, n) => [
      relationship(id, "owner", "alice"),
      ...(n % 10 === 0 ? [relationship(id, "reader", "bob")] : []),
    ]);
    try {
      for (let i = 0; i < updates.length; i += 500)
        await zed.promises.writeRelationships(
          v1.WriteRelationshipsRequest.create({ updates: updates.slice(i, i + 500) }),
        );
    } finally {
      zed.close();
    }
    for (const id of ids.slice(0, 5)) {
      const key = `gw:zedtoken:{response:${scopedId(org, id)}}`;
      await stack.redis.set(key, "an-earlier-token", "EX", 86_400);
      await stack.redis.zadd(`${key}:expiries`, clock.wall() + 60_000, String(clock.wall() + 60_000));
    }
    const calls = async (method: string) => {
      const text = await (await fetch(`${stack.serviceUrl}/metrics`)).text();
      const line = text
        .split("\n")
        .find(
          (l) =>
            l.startsWith("grpc_client_handled_total{") &&
            l.includes(`grpc_method="${method}"`) &&
            l.includes('grpc_code="OK"'),
        );
      return Number(line?.split(" ").at(-1) ?? 0);
    };
    const [writesBefore, deletesBefore] = [
      await calls("WriteRelationships"),
      await calls("DeleteRelationships"),
    ];

    const report = await stack.sweep();
    expect(report?.responses).toBe(count);
    expect(
      await readRelationshipLines(stack.spicedb, {
        resourceType: "response",
        optionalResourceIdPrefix: `${scopedId(org, "")}`,
      }),
    ).toEqual([]);
    // Three batches (500, 500, 3), each one transaction in SpiceDB.
    expect((await calls("WriteRelationships")) - writesBefore).toBe(3);
    expect((await calls("DeleteRelationships")) - deletesBefore).toBe(0);
    expect(await scanKeys(stack.redis, `gw:zedtoken:{response:${scopedId(org, "")}*`)).toEqual([]);
  });

  it("readWholeTypes (the local engine): reads each type's relationships a page at a time and deletes only those of expired rows", async () => {
    const org = `org-whole-${clock.wall()}`;
    const other = `org-other-${clock.wall()}`;
    const count = 1203;
    const ids = Array.from({ length: count }, (_, n) => `resp_whole${n}`);
    await stack.db.query(
      `INSERT INTO responses (org, id, body, input, stored_at)
       SELECT $1, id, '{}'::json, '[]'::json, $2 FROM unnest($3::text[]) AS id`,
      [org, new Date(clock.wall() - 10_000), ids],
    );
    // Another organization's response with the same id, not expired: its relationships stay.
    await stack.db.query(
      `INSERT INTO responses (org, id, body, input, stored_at) VALUES ($1, $2, '{}'::json, '[]'::json, $3)`,
      [other, ids[0], new Date(clock.wall() + 60_000)],
    );
    const zed = v1.NewClient(
      stack.spicedb.presharedKey,
      stack.spicedb.endpoint,
      v1.ClientSecurity.INSECURE_PLAINTEXT_CREDENTIALS,
    );
    const relationship = (owner: string, id: string, relation: string, user: string) =>
      v1.RelationshipUpdate.create({
        operation: v1.RelationshipUpdate_Operation.TOUCH,
        relationship: v1.Relationship.create({
          resource: v1.ObjectReference.create({ objectType: "response", objectId: scopedId(owner, id) }),
          relation,
          subject: v1.SubjectReference.create({
            object: v1.ObjectReference.create({ objectType: "user", objectId: scopedId(owner, user) }),
          }),
        }),
      });
    // More relationships than one page (1000) holds.
    const updates = ids.flatMap((id, n) => [
      relationship(org, id, "owner", "alice"),
      ...(n % 10 === 0 ? [relationship(org, id, "reader", "bob")] : []),
    ]);
    updates.push(relationship(other, ids[0]!, "owner", "carol"));
    try {
      for (let i = 0; i < updates.length; i += 500)
        await zed.promises.writeRelationships(
          v1.WriteRelationshipsRequest.create({ updates: updates.slice(i, i + 500) }),
        );
    } finally {
      zed.close();
    }
    await stack.redis.set(
      `gw:zedtoken:{response:${scopedId(org, ids[7]!)}}`,
      "an-earlier-token",
      "EX",
      86_400,
    );
    const spicedb = new SpiceDBClient({
      endpoint: stack.spicedb.endpoint,
      presharedKey: stack.spicedb.presharedKey,
      insecure: true,
      deadlineMs: 10_000,
    });
    const sweeper = new RetentionSweeper({
      db: stack.db,
      spicedb,
      tokens: new RedisConsistencyTokens(stack.redis, 5_000),
      logger: createLogger("retention-test", "warn"),
      clock,
      options: { responseRetentionMs: 5_000, sweepIntervalMs: 3_600_000, readWholeTypes: true },
    });
    try {
      const report = await sweeper.sweep();
      expect(report?.responses).toBeGreaterThanOrEqual(count);
    } finally {
      spicedb.close();
    }
    expect(await rowCount("SELECT count(*) AS n FROM responses WHERE org = $1", [org])).toBe(0);
    expect(
      await readRelationshipLines(stack.spicedb, {
        resourceType: "response",
        optionalResourceIdPrefix: `${scopedId(org, "")}`,
      }),
    ).toEqual([]);
    expect(await relationships("response", other, ids[0]!)).toEqual([`owner ${scopedId(other, "carol")}`]);
    expect(await rowCount("SELECT count(*) AS n FROM responses WHERE org = $1", [other])).toBe(1);
    expect(await scanKeys(stack.redis, `gw:zedtoken:{response:${scopedId(org, "")}*`)).toEqual([]);
  });

  it("deletes in batches of SWEEP_BATCH until nothing expired is left", async () => {
    const org = `org-batch-${clock.wall()}`;
    const count = SWEEP_BATCH * 2 + 7;
    await stack.db.query(
      `INSERT INTO responses (org, id, body, input, stored_at)
       SELECT $1, 'resp_' || n, '{}'::json, '[]'::json, $2 FROM generate_series(1, $3) AS n`,
      [org, new Date(clock.wall() - 10_000), count],
    );
    await stack.db.query(
      `INSERT INTO chat_completions (org, id, body, messages, stored_at)
       SELECT $1, 'chatcmpl-' || n, '{}'::json, '[]'::json, $2 FROM generate_series(1, $3) AS n`,
      [org, new Date(clock.wall() - 10_000), count],
    );
    const report = await stack.sweep();
    // At least these: the sweep is the stack's, and content an earlier test stored may have expired too.
    expect(report?.responses).toBeGreaterThanOrEqual(count);
    expect(report?.completions).toBeGreaterThanOrEqual(count);
    expect(await rowCount("SELECT count(*) AS n FROM responses WHERE org = $1", [org])).toBe(0);
    expect(await rowCount("SELECT count(*) AS n FROM chat_completions WHERE org = $1", [org])).toBe(0);
  });
});

describe("CONVERSATION_IDLE_EXPIRY=1h", () => {
  it("an idle conversation is 404 at once; the sweep deletes it, its items and its relationships; an active one stays", async () => {
    const key = await stack.createKey();
    const create = async () => {
      const res = await stack.call(key.secret, CONV, {
        json: { items: [{ role: "user", content: "hello" }] },
        user: "alice",
      });
      expect(res.status).toBe(200);
      return ((await res.json()) as { id: string }).id;
    };
    const idle = await create();
    const active = await create();
    await grant(key.secret, "conversation", idle, "bob");
    const firstItems: Record<string, string> = {};
    for (const id of [idle, active]) {
      const items = await stack.call(key.secret, `${CONV}/${id}/items?order=asc`, { user: "alice" });
      firstItems[id] = (await items.json()).data[0].id;
    }

    clock.advance(40 * 60_000);
    // Adding items is activity: `active` stays for another hour from here.
    const added = await stack.call(key.secret, `${CONV}/${active}/items`, {
      json: { items: [{ role: "user", content: "still here" }] },
      user: "alice",
    });
    expect(added.status).toBe(200);
    clock.advance(30 * 60_000);

    const as = (user: string, path: string, init: { method?: string; json?: unknown } = {}) =>
      stack.call(key.secret, path, { ...init, user }).then((r) => r.status);
    for (const user of ["alice", "bob"]) {
      expect(await as(user, `${CONV}/${idle}`)).toBe(404);
      expect(await as(user, `${CONV}/${idle}/items`)).toBe(404);
    }
    expect(
      await as("alice", `${CONV}/${idle}/items`, { json: { items: [{ role: "user", content: "x" }] } }),
    ).toBe(404);
    expect(await as("alice", RESPONSES, { json: { input: "x", conversation: idle } })).toBe(404);
    // Nor is an idle conversation's item found by reference; an active one's is.
    const reference = (conversation: string) =>
      as("alice", RESPONSES, { json: { input: [{ type: "item_reference", id: firstItems[conversation] }] } });
    expect(await reference(idle)).toBe(404);
    expect(await reference(active)).toBe(200);
    expect(await as("alice", `${CONV}/${active}`)).toBe(200);

    const report = await stack.sweep();
    expect(report?.conversations).toBeGreaterThanOrEqual(1);
    const rows = (id: string) =>
      rowCount(
        `SELECT (SELECT count(*) FROM conversations WHERE org = $1 AND id = $2)
              + (SELECT count(*) FROM conversation_items WHERE org = $1 AND conversation_id = $2) AS n`,
        [key.org, id],
      );
    expect(await rows(idle)).toBe(0);
    expect(await relationships("conversation", key.org, idle)).toEqual([]);
    expect(await rows(active)).toBe(3);
    expect(await relationships("conversation", key.org, active)).toEqual([
      `organization ${key.org}`,
      `owner ${scopedId(key.org, "alice")}`,
    ]);
    expect(await as("alice", `${CONV}/${active}/items`)).toBe(200);
  });
});

describe("the sweep", () => {
  it("runs on one replica at a time: while another holds the lock, it does nothing", async () => {
    const holder = new pg.Client({ connectionString: stack.database.url });
    await holder.connect();
    try {
      await holder.query("SELECT pg_advisory_lock($1)", [SWEEP_LOCK]);
      expect(await stack.sweep()).toBeUndefined();
      await holder.query("SELECT pg_advisory_unlock($1)", [SWEEP_LOCK]);
      expect(await stack.sweep()).toEqual({
        responses: expect.any(Number),
        completions: expect.any(Number),
        conversations: expect.any(Number),
        files: expect.any(Number),
        vectorStores: expect.any(Number),
        grantExpiries: expect.any(Number),
      });
    } finally {
      await holder.end();
    }
  });
});
