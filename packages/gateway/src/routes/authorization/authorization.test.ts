import { v1 } from "@gw/core/authz";
import { describe, expect, it } from "vitest";
import { FORBIDDEN_BODY, newOrg, RANK } from "../../../test/authorization-helpers.ts";
import { useGateway } from "../../../test/harness.ts";

const gw = useGateway();
const ROLES = ["owner", "writer", "reader"] as const;

describe("grant, check and revoke: every actor role against every operation", () => {
  // The actor's standing on the resource, and how it got it.
  const actors = [
    { standing: "owner", rank: 3 },
    { standing: "writer", rank: 2 },
    { standing: "reader", rank: 1 },
    { standing: "none", rank: 0 },
    { standing: "public reader", rank: 1 },
  ] as const;

  it.each(actors)("$standing", async ({ standing, rank }) => {
    const o = await newOrg(gw);
    const id = await o.create("alice");
    const actor = standing === "owner" ? "alice" : "actor";
    if (standing === "writer" || standing === "reader") {
      expect(
        (
          await o.grant("alice", {
            resourceType: "conversation",
            resourceId: id,
            userId: "actor",
            role: standing,
          })
        ).status,
      ).toBe(204);
    }
    if (standing === "public reader") {
      expect(
        (
          await o.grant("alice", {
            resourceType: "conversation",
            resourceId: id,
            userId: "*",
            role: "reader",
          })
        ).status,
      ).toBe(204);
    }

    for (const role of ROLES) {
      expect(await o.check(actor, "conversation", id, role), `check ${role}`).toBe(rank >= RANK[role]);
    }

    const grant = await o.grant(actor, {
      resourceType: "conversation",
      resourceId: id,
      userId: "zed",
      role: "reader",
    });
    const revoke = await o.revoke(actor, {
      resourceType: "conversation",
      resourceId: id,
      userId: "zed",
      role: "reader",
    });
    if (standing === "owner") {
      expect(grant.status).toBe(204);
      expect(await grant.text()).toBe("");
      expect(revoke.status).toBe(204);
    } else {
      expect(grant.status).toBe(403);
      expect(await grant.json()).toEqual(FORBIDDEN_BODY);
      expect(revoke.status).toBe(403);
      expect(await revoke.json()).toEqual(FORBIDDEN_BODY);
      // Nothing was granted: zed reads only if everybody does.
      expect(await o.check("zed", "conversation", id, "reader")).toBe(standing === "public reader");
    }
  });

  it("refuses grant and revoke on a resource that does not exist with the same 403, so existence does not leak", async () => {
    const o = await newOrg(gw);
    for (const op of [o.grant, o.revoke]) {
      const res = await op("alice", {
        resourceType: "file",
        resourceId: "file_nope",
        userId: "bob",
        role: "reader",
      });
      expect(res.status).toBe(403);
      expect(await res.json()).toEqual(FORBIDDEN_BODY);
    }
    expect(await o.check("alice", "file", "file_nope", "reader")).toBe(false);
  });

  it("works for every resource type", async () => {
    const o = await newOrg(gw);
    for (const type of ["completion", "file", "vector_store", "conversation", "response", "skill"] as const) {
      const id = await o.create("alice", type);
      expect(await o.check("alice", type, id, "owner")).toBe(true);
      expect(
        (await o.grant("alice", { resourceType: type, resourceId: id, userId: "bob", role: "writer" }))
          .status,
      ).toBe(204);
      expect(await o.check("bob", type, id, "writer")).toBe(true);
      expect(await o.check("bob", type, id, "owner")).toBe(false);
    }
  });
});

describe("one role per user", () => {
  it("grant replaces the user's other role, atomically", async () => {
    const o = await newOrg(gw);
    const id = await o.create("alice");
    const body = { resourceType: "conversation", resourceId: id, userId: "bob" };
    expect((await o.grant("alice", { ...body, role: "writer" })).status).toBe(204);
    expect(await o.check("bob", "conversation", id, "writer")).toBe(true);
    expect((await o.grant("alice", { ...body, role: "reader" })).status).toBe(204);
    expect(await o.check("bob", "conversation", id, "writer")).toBe(false);
    expect(await o.check("bob", "conversation", id, "reader")).toBe(true);

    const client = v1.NewClient(
      gw.spicedb.presharedKey,
      gw.spicedb.endpoint,
      v1.ClientSecurity.INSECURE_PLAINTEXT_CREDENTIALS,
    );
    const relationships = await client.promises.readRelationships(
      v1.ReadRelationshipsRequest.create({
        consistency: v1.Consistency.create({
          requirement: { oneofKind: "fullyConsistent", fullyConsistent: true },
        }),
        relationshipFilter: v1.RelationshipFilter.create({
          resourceType: "conversation",
          optionalResourceId: `${o.org}/${id}`,
        }),
      }),
    );
    client.close();
    expect(
      relationships
        .map(
          (r) =>
            `${r.relationship?.relation} ${r.relationship?.subject?.object?.objectType}:${r.relationship?.subject?.object?.objectId}`,
        )
        .sort(),
    ).toEqual([
      `organization organization:${o.org}`,
      `owner user:${o.org}/alice`,
      `reader user:${o.org}/bob`,
    ]);
  });

  it("revoke removes only the role named; revoking a role not held is a 204 that changes nothing", async () => {
    const o = await newOrg(gw);
    const id = await o.create("alice");
    const body = { resourceType: "conversation", resourceId: id, userId: "bob" };
    await o.grant("alice", { ...body, role: "writer" });
    expect((await o.revoke("alice", { ...body, role: "reader" })).status).toBe(204);
    expect(await o.check("bob", "conversation", id, "writer")).toBe(true);
    expect((await o.revoke("alice", { ...body, role: "writer" })).status).toBe(204);
    for (const role of ROLES) expect(await o.check("bob", "conversation", id, role)).toBe(false);
    expect((await o.revoke("alice", { ...body, role: "writer" })).status).toBe(204);
  });

  it("after revoke a check is false unless public access grants it", async () => {
    const o = await newOrg(gw);
    const id = await o.create("alice");
    await o.grant("alice", { resourceType: "conversation", resourceId: id, userId: "*", role: "reader" });
    await o.grant("alice", { resourceType: "conversation", resourceId: id, userId: "bob", role: "reader" });
    await o.revoke("alice", { resourceType: "conversation", resourceId: id, userId: "bob", role: "reader" });
    expect(await o.check("bob", "conversation", id, "reader")).toBe(true);
    await o.revoke("alice", { resourceType: "conversation", resourceId: id, userId: "*", role: "reader" });
    expect(await o.check("bob", "conversation", id, "reader")).toBe(false);
  });
});

describe("public access (*)", () => {
  it("reader for * lets every user of the organization read, not write", async () => {
    const o = await newOrg(gw);
    const id = await o.create("alice");
    expect(
      (await o.grant("alice", { resourceType: "conversation", resourceId: id, userId: "*", role: "reader" }))
        .status,
    ).toBe(204);
    expect(await o.check("someone-else", "conversation", id, "reader")).toBe(true);
    expect(await o.check("someone-else", "conversation", id, "writer")).toBe(false);
    // The key's own owner, acting without X-On-Behalf-Of, is a user of the org too.
    const res = await gw.call(
      `/api/v1/authorization/llm/check?resourceType=conversation&resourceId=${id}&role=reader`,
      { bearer: o.secret },
    );
    expect(await res.json()).toEqual({ allowed: true });
  });

  it("writer for * lets every user of the organization write, and nobody grant", async () => {
    const o = await newOrg(gw);
    const id = await o.create("alice");
    await o.grant("alice", { resourceType: "conversation", resourceId: id, userId: "*", role: "writer" });
    expect(await o.check("dave", "conversation", id, "writer")).toBe(true);
    expect(await o.check("dave", "conversation", id, "owner")).toBe(false);
    expect(
      (await o.grant("dave", { resourceType: "conversation", resourceId: id, userId: "eve", role: "reader" }))
        .status,
    ).toBe(403);
  });

  it("* cannot be an owner: 422 at body.userId", async () => {
    const o = await newOrg(gw);
    const id = await o.create("alice");
    for (const op of [o.grant, o.revoke]) {
      const res = await op("alice", {
        resourceType: "conversation",
        resourceId: id,
        userId: "*",
        role: "owner",
      });
      expect(res.status).toBe(422);
      const { detail } = await res.json();
      expect(detail).toHaveLength(1);
      expect(detail[0]).toMatchObject({ loc: ["body", "userId"], input: "*" });
    }
  });

  it("no end user is named * (everyone, in a grant): acting as one is refused, so no one is taken for everyone", async () => {
    const o = await newOrg(gw);
    const id = await o.create("alice");
    await o.grant("alice", { resourceType: "conversation", resourceId: id, userId: "*", role: "reader" });
    const refused = await o.checkResponse("*", {
      resourceType: "conversation",
      resourceId: id,
      role: "reader",
    });
    expect(refused.status).toBe(422);
    expect((await refused.json()).detail).toEqual([
      expect.objectContaining({ loc: ["header", "x-on-behalf-of"], input: "*" }),
    ]);
    // Everyone, as a grant names them, still reads it.
    expect(await o.check("someone", "conversation", id, "reader")).toBe(true);
    expect(await o.check("someone", "conversation", id, "writer")).toBe(false);
  });
});

describe("the last owner", () => {
  it("cannot be revoked or demoted (409); with a second owner it can", async () => {
    const o = await newOrg(gw);
    const id = await o.create("alice");
    const body = { resourceType: "conversation", resourceId: id };
    for (const res of [
      await o.revoke("alice", { ...body, userId: "alice", role: "owner" }),
      await o.grant("alice", { ...body, userId: "alice", role: "writer" }),
    ]) {
      expect(res.status).toBe(409);
      expect(await res.json()).toEqual({
        error: "Conflict",
        message: expect.stringMatching(/last owner/i),
        code: "last_owner",
      });
    }
    expect(await o.check("alice", "conversation", id, "owner")).toBe(true);

    expect((await o.grant("alice", { ...body, userId: "bob", role: "owner" })).status).toBe(204);
    expect((await o.grant("alice", { ...body, userId: "alice", role: "reader" })).status).toBe(204);
    expect(await o.check("alice", "conversation", id, "owner")).toBe(false);
    expect(await o.check("alice", "conversation", id, "reader")).toBe(true);
    expect((await o.revoke("bob", { ...body, userId: "bob", role: "owner" })).status).toBe(409);
  });
});

describe("organizations are isolated", () => {
  it("another org's same-named user, same resource id, or * never reaches a resource", async () => {
    const a = await newOrg(gw);
    const b = await newOrg(gw);
    const id = await a.create("alice");
    await a.grant("alice", { resourceType: "conversation", resourceId: id, userId: "*", role: "reader" });

    // Org B's alice, with B's key, asking about the same id: that names B's (non-existent) resource.
    expect(await b.check("alice", "conversation", id, "reader")).toBe(false);
    expect(await b.check("alice", "conversation", id, "owner")).toBe(false);
    const res = await b.grant("alice", {
      resourceType: "conversation",
      resourceId: id,
      userId: "mallory",
      role: "owner",
    });
    expect(res.status).toBe(403);

    // B makes its own resource with the same id, public for writing: A's stays as it was.
    await b.create("bob", "conversation", id);
    await b.grant("bob", { resourceType: "conversation", resourceId: id, userId: "*", role: "writer" });
    expect(await b.check("mallory", "conversation", id, "writer")).toBe(true);
    expect(await a.check("mallory", "conversation", id, "writer")).toBe(false);
    expect(await a.check("alice", "conversation", id, "owner")).toBe(true);
    expect(await a.check("bob", "conversation", id, "owner")).toBe(false);
  });
});

describe("validation and permissions", () => {
  it.each([
    [
      { resourceType: "spreadsheet", resourceId: "x", userId: "u", role: "reader" },
      ["body", "resourceType"],
      "enum",
    ],
    [{ resourceType: "file", resourceId: "x", userId: "u", role: "admin" }, ["body", "role"], "enum"],
    [{ resourceType: "file", userId: "u", role: "reader" }, ["body", "resourceId"], "missing"],
    [
      { resourceType: "file", resourceId: 7, userId: "u", role: "reader" },
      ["body", "resourceId"],
      "string_type",
    ],
    [
      { resourceType: "file", resourceId: "", userId: "u", role: "reader" },
      ["body", "resourceId"],
      "string_too_short",
    ],
    [
      { resourceType: "file", resourceId: "x", userId: "u".repeat(257), role: "reader" },
      ["body", "userId"],
      "string_too_long",
    ],
    [
      { resourceType: "file", resourceId: "x", userId: "u", role: "reader", extra: 1 },
      ["body", "extra"],
      "extra_forbidden",
    ],
  ])("grant %j → 422 at %j (%s)", async (body, loc, type) => {
    const o = await newOrg(gw);
    const res = await o.grant("alice", body);
    expect(res.status).toBe(422);
    const { detail } = await res.json();
    expect(detail).toEqual([expect.objectContaining({ loc, type })]);
  });

  it("check validates its query", async () => {
    const o = await newOrg(gw);
    const res = await o.checkResponse("alice", { resourceType: "conversation", role: "boss" });
    expect(res.status).toBe(422);
    const types = (await res.json()).detail.map(
      (d: { loc: string[]; type: string }) => `${d.loc.join(".")}:${d.type}`,
    );
    expect(types.sort()).toEqual(["query.resourceId:missing", "query.role:enum"]);
  });

  it("grant and revoke need authorization:write, check needs authorization:read", async () => {
    const { secret } = await gw.createKey({ permissions: ["authorization:read"] });
    const grant = await gw.call("/api/v1/authorization/llm/grant", {
      method: "POST",
      bearer: secret,
      json: { resourceType: "file", resourceId: "x", userId: "u", role: "reader" },
    });
    expect(grant.status).toBe(403);
    expect((await grant.json()).message).toContain("authorization:write");
    const { secret: writeOnly } = await gw.createKey({ permissions: ["authorization:write"] });
    const check = await gw.call(
      "/api/v1/authorization/llm/check?resourceType=file&resourceId=x&role=reader",
      {
        bearer: writeOnly,
      },
    );
    expect(check.status).toBe(403);
    expect((await check.json()).message).toContain("authorization:read");
  });

  it("user ids outside SpiceDB's alphabet work and read well in zed", async () => {
    const o = await newOrg(gw);
    const id = await o.create("Jane Doe@example.com");
    expect(await o.check("Jane Doe@example.com", "conversation", id, "owner")).toBe(true);
    expect(await o.check("Jane Doe@example=2Ecom", "conversation", id, "owner")).toBe(false);
    await o.grant("Jane Doe@example.com", {
      resourceType: "conversation",
      resourceId: id,
      userId: "bob/../eve",
      role: "reader",
    });
    expect(await o.check("bob/../eve", "conversation", id, "reader")).toBe(true);
    expect(await o.check("bob", "conversation", id, "reader")).toBe(false);
  });
});
