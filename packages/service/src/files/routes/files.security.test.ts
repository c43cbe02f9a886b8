import { describe, expect, it } from "vitest";
import { FILES, upload, uploaded } from "../../../test/files.ts";
import { llmError, useStack } from "../../../test/stack.ts";

const stack = useStack();
const AUTHZ = "/api/v1/authorization/llm";

/** alice's two files on a fresh key, the first shared with bob as `role` (none: bob a stranger to both). */
async function aliceFiles(role?: "owner" | "writer" | "reader", grantee = "bob") {
  const key = await stack.createKey();
  const shared = await uploaded(stack, key.secret, { content: "shared", user: "alice" });
  const kept = await uploaded(stack, key.secret, { content: "kept", user: "alice" });
  if (role) {
    const grant = await stack.call(key.secret, `${AUTHZ}/grant`, {
      json: { resourceType: "file", resourceId: shared.id, userId: grantee, role },
      user: "alice",
    });
    expect(grant.status).toBe(204);
  }
  const as = (user: string, secret = key.secret) => ({
    list: async () => {
      const res = await stack.call(secret, FILES, { user });
      expect(res.status).toBe(200);
      return ((await res.json()).data as { id: string }[]).map((f) => f.id);
    },
    get: (id: string) => stack.call(secret, `${FILES}/${id}`, { user }).then((r) => r.status),
    content: (id: string) => stack.call(secret, `${FILES}/${id}/content`, { user }).then((r) => r.status),
    remove: (id: string) => stack.call(secret, `${FILES}/${id}`, { method: "DELETE", user }),
  });
  return { key, shared, kept, as };
}

describe("who may see a file", () => {
  it("a file shared with bob is in bob's list; alice's other file is not, and nothing is in carol's", async () => {
    const { shared, kept, as } = await aliceFiles("reader");
    expect(await as("alice").list()).toEqual([kept.id, shared.id]);
    expect(await as("bob").list()).toEqual([shared.id]);
    expect(await as("carol").list()).toEqual([]);
    expect(await as("bob").get(shared.id)).toBe(200);
    expect(await as("bob").content(shared.id)).toBe(200);
    // What bob may not read is as missing for him as what does not exist.
    for (const read of [as("bob").get, as("bob").content]) expect(await read(kept.id)).toBe(404);
  });

  it("a public reader grant (*) opens that file to every user of the organization, and only that file", async () => {
    const { shared, kept, as } = await aliceFiles("reader", "*");
    for (const user of ["bob", "carol"]) {
      expect(await as(user).list()).toEqual([shared.id]);
      expect(await as(user).get(kept.id)).toBe(404);
    }
  });

  it("a revoke takes the file out of bob's list and reads at once", async () => {
    const { key, shared, as } = await aliceFiles("reader");
    expect(await as("bob").list()).toEqual([shared.id]);
    const revoke = await stack.call(key.secret, `${AUTHZ}/revoke`, {
      json: { resourceType: "file", resourceId: shared.id, userId: "bob", role: "reader" },
      user: "alice",
    });
    expect(revoke.status).toBe(204);
    expect(await as("bob").list()).toEqual([]);
    expect(await as("bob").content(shared.id)).toBe(404);
  });

  it.each([
    ["owner", 200],
    ["writer", 403],
    ["reader", 403],
    [undefined, 404],
  ] as const)("as %s, bob's delete answers %i; only an owner's deletes", async (role, status) => {
    const { shared, as } = await aliceFiles(role);
    const res = await as("bob").remove(shared.id);
    expect(res.status).toBe(status);
    if (status === 403)
      expect(await res.json()).toEqual(llmError("forbidden", "This file needs the 'owner' role"));
    expect(await as("alice").get(shared.id)).toBe(status === 200 ? 404 : 200);
  });

  it("another organization sees nothing of it, even as a user of the same name", async () => {
    const { shared } = await aliceFiles("reader");
    const other = await stack.createKey();
    const { as } = await aliceFiles();
    const outsider = as("alice", other.secret);
    expect(await outsider.list()).toEqual([]);
    expect(await outsider.get(shared.id)).toBe(404);
    expect(await outsider.content(shared.id)).toBe(404);
    expect((await outsider.remove(shared.id)).status).toBe(404);
  });

  it("needs files:write to upload and delete, files:read to list and read", async () => {
    const { key, shared } = await aliceFiles();
    const reader = await stack.createKey({ org: key.org, permissions: ["files:read"] });
    const writer = await stack.createKey({ org: key.org, permissions: ["files:write"] });
    const refused = await upload(stack, reader.secret, {
      content: "x",
      purpose: "assistants",
      user: "alice",
    });
    expect(refused.status).toBe(403);
    expect((await refused.json()).error.message).toContain("files:write");
    expect(
      (await stack.call(reader.secret, `${FILES}/${shared.id}`, { method: "DELETE", user: "alice" })).status,
    ).toBe(403);
    expect((await stack.call(reader.secret, `${FILES}/${shared.id}`, { user: "alice" })).status).toBe(200);
    for (const path of [FILES, `${FILES}/${shared.id}`, `${FILES}/${shared.id}/content`]) {
      const res = await stack.call(writer.secret, path, { user: "alice" });
      expect(res.status, path).toBe(403);
      expect((await res.json()).error.message).toContain("files:read");
    }
    expect((await upload(stack, writer.secret, { content: "x", purpose: "assistants" })).status).toBe(200);
  });

  it("a new key holds the files and vector stores permissions by default", async () => {
    const key = await stack.createKey();
    const whoami = await (await stack.call(key.secret, "/api/v1/authentication/whoami")).json();
    expect(whoami.permissions).toEqual(
      expect.arrayContaining(["files:read", "files:write", "vector_stores:read", "vector_stores:write"]),
    );
  });
});

describe("a file id the service issued", () => {
  it("cannot be registered by anyone, nor its authorization dropped through the platform API", async () => {
    const { key, shared, as } = await aliceFiles();
    const dropped = await stack.call(key.secret, `${AUTHZ}/resources/file/${shared.id}`, {
      method: "DELETE",
      user: "alice",
    });
    expect(dropped.status).toBe(409);
    expect(await dropped.json()).toEqual({
      error: "Conflict",
      message: "A file's authorization goes with its content: delete it with DELETE /api/v1/llm/files/{id}",
      code: "service_issued_id",
    });
    for (const secret of [key.secret, (await stack.createKey()).secret]) {
      const taken = await stack.call(secret, `${AUTHZ}/resources`, {
        json: { resourceType: "file", resourceId: shared.id },
        user: "mallory",
      });
      expect(taken.status).toBe(409);
      expect((await taken.json()).code).toBe("service_issued_id");
    }
    // Nor one not issued yet, of the same shape; another backend's own file ids are still its own to register.
    const future = `file_${"0".repeat(32)}`;
    const early = await stack.call(key.secret, `${AUTHZ}/resources`, {
      json: { resourceType: "file", resourceId: future },
      user: "mallory",
    });
    expect(early.status).toBe(409);
    const theirs = await stack.call(key.secret, `${AUTHZ}/resources`, {
      json: { resourceType: "file", resourceId: "file-in-our-dms-42" },
      user: "mallory",
    });
    expect(theirs.status).toBe(201);
    // Nor does the Files API drop another backend's registration: it is no file here, even for its owner.
    expect((await as("mallory").remove("file-in-our-dms-42")).status).toBe(404);
    const still = new URLSearchParams({
      resourceType: "file",
      resourceId: "file-in-our-dms-42",
      role: "owner",
    });
    expect(
      (await (await stack.call(key.secret, `${AUTHZ}/check?${still}`, { user: "mallory" })).json()).allowed,
    ).toBe(true);
    expect(await as("mallory").get(shared.id)).toBe(404);
    // A registered id that names no uploaded file is listed by nobody's files.
    expect(await as("mallory").list()).toEqual([]);
  });

  it("grants, checks, lookups, revokes and the audit trail take it as resourceType file", async () => {
    const { key, shared, kept } = await aliceFiles("reader");
    const check = async (user: string, id: string) => {
      const query = new URLSearchParams({ resourceType: "file", resourceId: id, role: "reader" });
      return (await (await stack.call(key.secret, `${AUTHZ}/check?${query}`, { user })).json()).allowed;
    };
    const lookup = async (user: string) => {
      const res = await stack.call(key.secret, `${AUTHZ}/resources?resourceType=file&role=reader`, { user });
      expect(res.status).toBe(200);
      return ((await res.json()).data as { resourceId: string }[]).map((r) => r.resourceId).sort();
    };
    expect(await check("bob", shared.id)).toBe(true);
    expect(await check("bob", kept.id)).toBe(false);
    expect(await lookup("bob")).toEqual([shared.id]);
    expect(await lookup("alice")).toEqual([shared.id, kept.id].sort());

    const revoke = await stack.call(key.secret, `${AUTHZ}/revoke`, {
      json: { resourceType: "file", resourceId: shared.id, userId: "bob", role: "reader" },
      user: "alice",
    });
    expect(revoke.status).toBe(204);
    expect(await check("bob", shared.id)).toBe(false);
    expect(await lookup("bob")).toEqual([]);

    const trail = await stack.call(key.secret, `${AUTHZ}/resources/file/${shared.id}/audit`, {
      user: "alice",
    });
    expect(trail.status).toBe(200);
    const { data } = (await trail.json()) as {
      data: { action: string; outcome: string; resourceType: string; resourceId: string }[];
    };
    expect(data.map((r) => [r.action, r.outcome, r.resourceType, r.resourceId])).toEqual([
      ["revoke", "allowed", "file", shared.id],
      ["grant", "allowed", "file", shared.id],
    ]);
    // Only an owner reads the trail.
    const bobs = await stack.call(key.secret, `${AUTHZ}/resources/file/${shared.id}/audit`, { user: "bob" });
    expect(bobs.status).toBe(403);
  });
});
