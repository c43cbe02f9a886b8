import { describe, expect, it } from "vitest";
import { FORBIDDEN_BODY, newOrg, type Org } from "../../../test/authorization-helpers.ts";
import { useGateway } from "../../../test/harness.ts";

const gw = useGateway();

const ids = async (res: Response) => {
  expect(res.status).toBe(200);
  const body = await res.json();
  return (body.data as { resourceId: string }[]).map((d) => d.resourceId).sort();
};

/** Every page of a lookup, following `next_cursor` until it is null. */
async function allPages(o: Org, actor: string, query: Record<string, string>) {
  const pages: string[][] = [];
  let cursor: string | null = null;
  do {
    const res = await o.list(actor, { ...query, ...(cursor ? { cursor } : {}) });
    expect(res.status).toBe(200);
    const body = await res.json();
    pages.push((body.data as { resourceId: string }[]).map((d) => d.resourceId));
    cursor = body.next_cursor;
  } while (cursor !== null && pages.length < 20);
  return pages;
}

describe("registering a resource made by another backend", () => {
  it("makes the principal its owner: 201, then a second registration is 409", async () => {
    const o = await newOrg(gw);
    const res = await o.register("alice", "file", "file_f1");
    expect(res.status).toBe(201);
    expect(await res.json()).toEqual({ resourceType: "file", resourceId: "file_f1", owner: "alice" });
    expect(await o.check("alice", "file", "file_f1", "owner")).toBe(true);

    const again = await o.register("mallory", "file", "file_f1");
    expect(again.status).toBe(409);
    expect(await again.json()).toEqual({
      error: "Conflict",
      message: expect.stringMatching(/already registered/),
      code: "already_registered",
    });
    expect(await o.check("mallory", "file", "file_f1", "reader")).toBe(false);
  });

  it("of registrations racing for one resource, exactly one lands, whatever the order", async () => {
    const o = await newOrg(gw);
    const users = ["u1", "u2", "u3", "u4", "u5"];
    const results = await Promise.all(users.map((u) => o.register(u, "vector_store", "vs_race")));
    expect(results.map((r) => r.status).sort()).toEqual([201, 409, 409, 409, 409]);
    const winner = users[results.findIndex((r) => r.status === 201)]!;
    for (const u of users) expect(await o.check(u, "vector_store", "vs_race", "owner")).toBe(u === winner);
  });

  it("validates its body and needs authorization:write", async () => {
    const o = await newOrg(gw);
    const bad = await o.register("alice", "spreadsheet", "");
    expect(bad.status).toBe(422);
    const { detail } = await bad.json();
    expect(detail.map((d: { loc: unknown[]; type: string }) => [d.loc, d.type])).toEqual([
      [["body", "resourceType"], "enum"],
      [["body", "resourceId"], "string_too_short"],
    ]);
    const { secret } = await gw.createKey({ org: o.org, permissions: ["authorization:read"] });
    const res = await gw.call("/api/v1/authorization/llm/resources", {
      method: "POST",
      bearer: secret,
      json: { resourceType: "file", resourceId: "f" },
    });
    expect(res.status).toBe(403);
  });
});

describe("deleting a resource's authorization", () => {
  it("owners only: removes every relationship, and every later check is false", async () => {
    const o = await newOrg(gw);
    await o.register("alice", "skill", "skill_1");
    const body = { resourceType: "skill", resourceId: "skill_1" };
    await o.grant("alice", { ...body, userId: "bob", role: "writer" });
    await o.grant("alice", { ...body, userId: "*", role: "reader" });

    for (const stranger of ["bob", "carol"]) {
      const refused = await o.deleteResource(stranger, "skill", "skill_1");
      expect(refused.status).toBe(403);
      expect(await refused.json()).toEqual(FORBIDDEN_BODY);
    }
    const res = await o.deleteResource("alice", "skill", "skill_1");
    expect(res.status).toBe(204);
    expect(await res.text()).toBe("");
    for (const user of ["alice", "bob", "carol"]) {
      for (const role of ["owner", "writer", "reader"])
        expect(await o.check(user, "skill", "skill_1", role)).toBe(false);
    }
    expect(await ids(await o.list("bob", { resourceType: "skill" }))).toEqual([]);
    // Nothing is left of it: a second delete is refused, and it can be registered anew.
    expect((await o.deleteResource("alice", "skill", "skill_1")).status).toBe(403);
    expect((await o.register("carol", "skill", "skill_1")).status).toBe(201);
  });

  it("refuses every conversation and response, owner or not, existing or not: their service deletes them", async () => {
    const o = await newOrg(gw);
    const id = await o.create("alice", "conversation");
    for (const [actor, type, resourceId] of [
      ["alice", "conversation", id],
      ["mallory", "conversation", id],
      ["alice", "response", "resp_none"],
    ] as const) {
      const res = await o.deleteResource(actor, type, resourceId);
      expect(res.status).toBe(409);
      expect(await res.json()).toEqual({
        error: "Conflict",
        message: `A ${type}'s authorization goes with its content: delete it with DELETE /api/v1/llm/${type}s/{id}`,
        code: "service_issued_id",
      });
    }
    expect(await o.check("alice", "conversation", id, "owner")).toBe(true);
    for (const type of ["conversation", "response"]) {
      const res = await o.register("bob", type, `${type}_x`);
      expect(res.status).toBe(409);
      expect(await res.json()).toEqual({
        error: "Conflict",
        message: `A ${type} id is issued by the service, which makes its creator the owner: it cannot be registered`,
        code: "service_issued_id",
      });
    }
  });

  it("validates the path", async () => {
    const o = await newOrg(gw);
    const res = await o.deleteResource("alice", "spreadsheet", "x");
    expect(res.status).toBe(422);
    expect((await res.json()).detail[0]).toMatchObject({ loc: ["path", "resourceType"], type: "enum" });
  });
});

describe("what a user can see", () => {
  it("lists what the grantee may read, not what others may", async () => {
    const o = await newOrg(gw);
    await o.register("alice", "file", "file_a");
    await o.register("alice", "file", "file_b");
    await o.grant("alice", { resourceType: "file", resourceId: "file_a", userId: "bob", role: "reader" });

    expect(await ids(await o.list("bob", { resourceType: "file", role: "reader" }))).toEqual(["file_a"]);
    expect(await ids(await o.list("bob", { resourceType: "file", role: "writer" }))).toEqual([]);
    expect(await ids(await o.list("alice", { resourceType: "file" }))).toEqual(["file_a", "file_b"]);
    expect(await ids(await o.list("alice", { resourceType: "file", role: "owner" }))).toEqual([
      "file_a",
      "file_b",
    ]);
    expect(await ids(await o.list("carol", { resourceType: "file" }))).toEqual([]);
    expect(await ids(await o.list("alice", { resourceType: "conversation" }))).toEqual([]);
  });

  it("pages in order of id: five resources in pages of 2, 2 and 1, nothing lost or repeated", async () => {
    const o = await newOrg(gw);
    const made = ["c1", "c2", "c3", "c4", "c5"];
    for (const id of [...made].reverse()) await o.register("alice", "skill", id);
    const pages = await allPages(o, "alice", { resourceType: "skill", limit: "2" });
    expect(pages).toEqual([["c1", "c2"], ["c3", "c4"], ["c5"]]);

    // Exactly a page's worth: the last page says so, no empty page after it.
    const four = await newOrg(gw);
    for (const id of made.slice(0, 4)) await four.register("alice", "skill", id);
    expect(
      (await allPages(four, "alice", { resourceType: "skill", limit: "2" })).map((p) => p.length),
    ).toEqual([2, 2]);
  });

  it("refuses bad limits, and a cursor that is not one, with 422", async () => {
    const o = await newOrg(gw);
    for (const query of [
      { resourceType: "file", cursor: "not-a-cursor" },
      { resourceType: "file", cursor: "a.b.c" },
      { resourceType: "file", cursor: `${Buffer.from("[1,2]").toString("base64url")}.x` },
    ]) {
      const res = await o.list("alice", query);
      expect(res.status, JSON.stringify(query)).toBe(422);
      expect((await res.json()).detail[0]).toMatchObject({ loc: ["query", "cursor"], type: "value_error" });
    }
    for (const [limit, type] of [
      ["0", "greater_than_equal"],
      ["1001", "less_than_equal"],
      ["x", "int_type"],
    ]) {
      const res = await o.list("alice", { resourceType: "file", limit: limit! });
      expect(res.status).toBe(422);
      expect((await res.json()).detail[0]).toMatchObject({ loc: ["query", "limit"], type });
    }
    const missing = await o.list("alice", {});
    expect((await missing.json()).detail[0]).toMatchObject({
      loc: ["query", "resourceType"],
      type: "missing",
    });
  });

  it("never lists another organization's resources, public or not, with the same ids and user names", async () => {
    const a = await newOrg(gw);
    const b = await newOrg(gw);
    await a.create("alice", "conversation", "conv_x");
    await a.grant("alice", {
      resourceType: "conversation",
      resourceId: "conv_x",
      userId: "*",
      role: "writer",
    });
    await b.create("alice", "conversation", "conv_y");

    expect(await ids(await b.list("alice", { resourceType: "conversation" }))).toEqual(["conv_y"]);
    expect(await ids(await b.list("dave", { resourceType: "conversation" }))).toEqual([]);
    expect(await ids(await a.list("dave", { resourceType: "conversation" }))).toEqual(["conv_x"]);
    expect(await ids(await a.list("dave", { resourceType: "conversation", role: "writer" }))).toEqual([
      "conv_x",
    ]);
  });
});

describe("who has access", () => {
  it("lists every grant for owners, ids as the organization knows them; anyone else gets 403", async () => {
    const o = await newOrg(gw);
    await o.register("alice", "file", "f/1");
    const body = { resourceType: "file", resourceId: "f/1" };
    const expiresAt = new Date(Date.now() + 3_600_000);
    expiresAt.setMilliseconds(0);
    await o.grant("alice", { ...body, userId: "Jane Doe", role: "writer" });
    await o.grant("alice", { ...body, userId: "bob", role: "reader", expiresAt: expiresAt.toISOString() });
    await o.grant("alice", { ...body, userId: "*", role: "reader" });
    await o.grant("alice", { ...body, userId: "carol", role: "owner" });

    const res = await o.grants("carol", "file", "f/1");
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({
      data: [
        { userId: "alice", role: "owner" },
        { userId: "carol", role: "owner" },
        { userId: "Jane Doe", role: "writer" },
        { userId: "*", role: "reader" },
        { userId: "bob", role: "reader", expiresAt: expiresAt.toISOString() },
      ],
    });
    for (const user of ["Jane Doe", "bob", "dave"]) {
      const refused = await o.grants(user, "file", "f/1");
      expect(refused.status).toBe(403);
      // A read, not a change: the message says which.
      expect(await refused.json()).toEqual({
        error: "Forbidden",
        message: "Only resource owners can see who holds its roles",
      });
    }
  });
});

describe("expiring grants", () => {
  it("admit the grantee until their time, then check, lists and grants forget them", async () => {
    const o = await newOrg(gw);
    await o.register("alice", "file", "f1");
    const expiresAt = new Date(Date.now() + 2_000).toISOString();
    const res = await o.grant("alice", {
      resourceType: "file",
      resourceId: "f1",
      userId: "bob",
      role: "reader",
      expiresAt,
    });
    expect(res.status).toBe(204);
    expect(await o.check("bob", "file", "f1", "reader")).toBe(true);
    expect(await ids(await o.list("bob", { resourceType: "file" }))).toEqual(["f1"]);

    while (Date.now() <= Date.parse(expiresAt) + 50) await new Promise((r) => setTimeout(r, 100));
    expect(await o.check("bob", "file", "f1", "reader")).toBe(false);
    expect(await ids(await o.list("bob", { resourceType: "file" }))).toEqual([]);
    expect((await (await o.grants("alice", "file", "f1")).json()).data).toEqual([
      { userId: "alice", role: "owner" },
    ]);
  });

  it("a past, malformed, too distant or owner expiry is 422 at body.expiresAt", async () => {
    const o = await newOrg(gw);
    await o.register("alice", "file", "f2");
    const base = { resourceType: "file", resourceId: "f2", userId: "bob", role: "reader" };
    const inDays = (days: number) => new Date(Date.now() + days * 86_400_000).toISOString();
    for (const [expiresAt, type, role] of [
      [new Date(Date.now() - 1_000).toISOString(), "datetime_future", "reader"],
      ["tomorrow", "datetime_parsing", "reader"],
      ["2030-02-30T00:00:00", "datetime_parsing", "reader"],
      [`${inDays(1).slice(0, 10)}T12:30:60Z`, "datetime_parsing", "reader"],
      [inDays(366), "value_error", "reader"],
      [inDays(1), "value_error", "owner"],
      [12345, "string_type", "reader"],
    ] as const) {
      const res = await o.grant("alice", { ...base, role, expiresAt });
      expect(res.status, String(expiresAt)).toBe(422);
      expect((await res.json()).detail).toEqual([
        expect.objectContaining({ loc: ["body", "expiresAt"], type, input: expiresAt }),
      ]);
    }
    expect(await o.check("bob", "file", "f2", "reader")).toBe(false);
    // Revoke takes no expiry.
    const revoke = await o.revoke("alice", { ...base, expiresAt: inDays(1) });
    expect(revoke.status).toBe(422);
    expect((await revoke.json()).detail[0]).toMatchObject({
      loc: ["body", "expiresAt"],
      type: "extra_forbidden",
    });
  });

  it("take RFC 3339 as written: lowercase t and z, offsets, a leap second; null is no expiry", async () => {
    const o = await newOrg(gw);
    await o.register("alice", "file", "f3");
    const base = { resourceType: "file", resourceId: "f3", role: "reader" };
    const day = new Date(Date.now() + 86_400_000).toISOString().slice(0, 10);
    const nextDay = new Date(Date.parse(`${day}T00:00:00Z`) + 86_400_000).toISOString();
    const cases = [
      ["bob", `${day}t12:00:00.5z`, `${day}T12:00:00.500Z`],
      ["carol", `${day}T23:59:60Z`, nextDay],
      ["dave", `${day}T18:29:60-05:30`, nextDay],
      ["erin", `${day}T14:00:00+02:00`, `${day}T12:00:00.000Z`],
    ] as const;
    for (const [userId, expiresAt] of cases)
      expect((await o.grant("alice", { ...base, userId, expiresAt })).status, expiresAt).toBe(204);
    expect((await o.grant("alice", { ...base, userId: "frank", expiresAt: null })).status).toBe(204);
    // null with owner is no expiry too, which an owner may have.
    expect((await o.grant("alice", { ...base, userId: "gina", role: "owner", expiresAt: null })).status).toBe(
      204,
    );

    const { data } = await (await o.grants("alice", "file", "f3")).json();
    const expiry = (userId: string) => data.find((g: { userId: string }) => g.userId === userId)?.expiresAt;
    for (const [userId, , expected] of cases) expect(expiry(userId), userId).toBe(expected);
    expect(data).toContainEqual({ userId: "frank", role: "reader" });
    expect(data).toContainEqual({ userId: "gina", role: "owner" });
  });
});

describe("the audit trail", () => {
  it("records every register, grant, revoke and delete, allowed or refused, newest first, without secrets", async () => {
    const o = await newOrg(gw);
    const r = { resourceType: "vector_store", resourceId: "vs_audit" };
    expect((await o.register("alice", "vector_store", "vs_audit")).status).toBe(201);
    expect((await o.register("mallory", "vector_store", "vs_audit")).status).toBe(409);
    expect((await o.grant("alice", { ...r, userId: "bob", role: "writer" })).status).toBe(204);
    expect((await o.grant("bob", { ...r, userId: "mallory", role: "reader" })).status).toBe(403);
    expect((await o.revoke("alice", { ...r, userId: "alice", role: "owner" })).status).toBe(409);
    expect((await o.revoke("alice", { ...r, userId: "bob", role: "writer" })).status).toBe(204);

    const res = await o.audit("alice", "vector_store", "vs_audit");
    expect(res.status).toBe(200);
    const text = await res.text();
    expect(text).not.toContain(o.secret);
    const { data, next_cursor } = JSON.parse(text);
    expect(next_cursor).toBeNull();
    expect(
      data.map((d: Record<string, string>) => [
        d.action,
        d.actor && (d.actor as never as { userId: string }).userId,
        d.subject,
        d.outcome,
      ]),
    ).toEqual([
      ["revoke", "alice", "bob", "allowed"],
      ["revoke", "alice", "alice", "conflict"],
      ["grant", "bob", "mallory", "denied"],
      ["grant", "alice", "bob", "allowed"],
      ["register", "mallory", undefined, "conflict"],
      ["register", "alice", undefined, "allowed"],
    ]);
    expect(data[0]).toEqual({
      id: expect.stringMatching(/^\d+-\d+$/),
      time: expect.any(String),
      organization: o.org,
      actor: { userId: "alice", keyId: o.keyId, credential: "api_key" },
      action: "revoke",
      resourceType: "vector_store",
      resourceId: "vs_audit",
      subject: "bob",
      role: "writer",
      outcome: "allowed",
      requestId: expect.any(String),
      zedToken: expect.any(String),
    });
    expect(data[2].zedToken).toBeUndefined();

    // Pages: newest first, two at a time, the cursor being the last id seen.
    const first = await (await o.audit("alice", "vector_store", "vs_audit", { limit: "2" })).json();
    const second = await (
      await o.audit("alice", "vector_store", "vs_audit", { limit: "2", cursor: first.next_cursor })
    ).json();
    expect([...first.data, ...second.data].map((d: { id: string }) => d.id)).toEqual(
      data.slice(0, 4).map((d: { id: string }) => d.id),
    );

    // Owners only.
    const refused = await o.audit("bob", "vector_store", "vs_audit");
    expect(refused.status).toBe(403);
    expect(await refused.json()).toEqual({
      error: "Forbidden",
      message: "Only resource owners can read its audit trail",
    });
    expect((await o.audit("alice", "vector_store", "vs_audit", { cursor: "x" })).status).toBe(422);
  });

  it("the whole organization's trail is for admin keys; another organization's records never appear", async () => {
    const o = await newOrg(gw);
    const other = await newOrg(gw);
    await o.register("alice", "file", "f_admin");
    await other.register("alice", "file", "f_admin");
    await o.deleteResource("alice", "file", "f_admin");

    expect((await gw.call("/api/v1/admin/audit", { bearer: o.secret })).status).toBe(403);
    const admin = await gw.createKey({ org: o.org, owner: "root", permissions: ["admin:api-keys"] });
    const res = await gw.call("/api/v1/admin/audit", { bearer: admin.secret });
    expect(res.status).toBe(200);
    const { data } = await res.json();
    expect(data.map((d: { action: string; organization: string }) => [d.action, d.organization])).toEqual([
      ["delete", o.org],
      ["register", o.org],
    ]);
  });

  it("counts each operation by outcome in the metrics", async () => {
    const o = await newOrg(gw);
    const metric = async (operation: string, outcome: string) => {
      const text = await (await gw.call("/metrics")).text();
      const line = text
        .split("\n")
        .find((l) =>
          l.startsWith(
            `gateway_authorization_operations_total{operation="${operation}",outcome="${outcome}"}`,
          ),
        );
      return Number(line?.split(" ").at(-1));
    };
    const before = await metric("register", "conflict");
    await o.register("alice", "file", "f_metric");
    await o.register("bob", "file", "f_metric");
    expect(await metric("register", "conflict")).toBe(before + 1);
    expect(await metric("lookup", "error")).toBeGreaterThanOrEqual(0);
  });
});
