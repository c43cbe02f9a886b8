import type { Permission } from "@gw/core/permissions";
import { expectJsonError } from "@gw/test-kit";
import { describe, expect, it } from "vitest";
import { useStack } from "../../../test/stack.ts";

const PATH = "/api/v1/guardrails";
const BAN = { type: "ban_words", words: ["zorblax"], patterns: ["zor+b"], leetspeak: false };
const INJECTION = { type: "prompt_injection" };

describe("guardrails as resources (/api/v1/guardrails)", () => {
  const stack = useStack();
  let orgCount = 0;
  const newOrg = () => `gr-org-${process.pid}-${++orgCount}-${Date.now().toString(36)}`;
  const keyOf = (org: string, owner: string, permissions?: Permission[]) =>
    stack.createKey({ org, owner, ...(permissions ? { permissions } : {}) });
  const create = (secret: string, body: Record<string, unknown> = {}) =>
    stack.call(secret, PATH, {
      json: { name: "no zorblax", checks: [BAN, INJECTION], applies_to: "both", action: "block", ...body },
    });
  async function created(secret: string, body: Record<string, unknown> = {}): Promise<{ id: string }> {
    const res = await create(secret, body);
    expect(res.status).toBe(200);
    return (await res.json()) as { id: string };
  }
  const attach = (secret: string, id: string, attachments: unknown[]) =>
    stack.call(secret, `${PATH}/${id}/attachments`, { method: "PUT", json: { attachments } });
  const grant = (secret: string, id: string, userId: string, role: string) =>
    stack.call(secret, "/api/v1/authorization/llm/grant", {
      json: { resourceType: "guardrail", resourceId: id, userId, role },
    });

  it("creates, reads, lists, changes and deletes a guardrail with a key's default permissions", async () => {
    const org = newOrg();
    const alice = await keyOf(org, "alice");
    const res = await create(alice.secret);
    expect(res.status).toBe(200);
    const made = await res.json();
    expect(made).toEqual({
      id: expect.stringMatching(/^gr_[0-9a-f]{32}$/),
      object: "guardrail",
      name: "no zorblax",
      checks: [BAN, INJECTION],
      applies_to: "both",
      action: "block",
      created_at: expect.any(Number),
    });
    expect(await (await stack.call(alice.secret, `${PATH}/${made.id}`)).json()).toEqual(made);

    const second = await created(alice.secret, { name: "secrets", checks: [{ type: "secrets" }] });
    const list = await (await stack.call(alice.secret, `${PATH}?order=asc`)).json();
    expect(list).toEqual({
      object: "list",
      data: [made, expect.objectContaining({ id: second.id, name: "secrets" })],
      first_id: made.id,
      last_id: second.id,
      has_more: false,
    });

    const patched = await stack.call(alice.secret, `${PATH}/${made.id}`, {
      method: "PATCH",
      json: { name: "renamed", checks: [{ type: "pii", kinds: ["email"] }], action: "redact" },
    });
    expect(patched.status).toBe(200);
    expect(await patched.json()).toEqual({
      ...made,
      name: "renamed",
      checks: [{ type: "pii", kinds: ["email"] }],
      action: "redact",
    });

    const deleted = await stack.call(alice.secret, `${PATH}/${made.id}`, { method: "DELETE" });
    expect(deleted.status).toBe(200);
    expect(await deleted.json()).toEqual({ id: made.id, object: "guardrail.deleted", deleted: true });
    await expectJsonError(await stack.call(alice.secret, `${PATH}/${made.id}`), 404);
    const left = await (await stack.call(alice.secret, PATH)).json();
    expect(left.data.map((g: { id: string }) => g.id)).toEqual([second.id]);
  });

  it("keeps every character of a banned word, U+0000 included", async () => {
    const alice = await keyOf(newOrg(), "alice");
    const check = { type: "ban_words", words: ["zor\u0000blax"], patterns: [], leetspeak: false };
    const { id } = await created(alice.secret, { checks: [check] });
    expect((await (await stack.call(alice.secret, `${PATH}/${id}`)).json()).checks).toEqual([check]);
  });

  it("refuses checks it does not know, unknown fields and empty check lists (422)", async () => {
    const alice = await keyOf(newOrg(), "alice");
    for (const body of [
      { checks: [{ type: "toxicity" }] },
      { checks: [] },
      { checks: [{ type: "ban_words", words: ["x"], flags: "i" }] },
      { checks: [{ type: "pii", kinds: ["ssn"] }] },
      { applies_to: "tools" },
      { action: "warn" },
      { extra: true },
    ]) {
      const error = await expectJsonError(await create(alice.secret, body), 422);
      expect(error.detail).toEqual(
        expect.arrayContaining([expect.objectContaining({ loc: expect.any(Array) })]),
      );
    }
    // A pattern RE2 refuses (a backreference) is refused here, before anything is stored.
    await expectJsonError(
      await create(alice.secret, { checks: [{ type: "ban_words", patterns: ["(a)\\1"] }] }),
      422,
    );
    // A name is quoted in callers' refusals: no line breaks or other control characters in it.
    for (const name of ["a\nb", "tab\there", "bell\u0007"]) {
      const error = await expectJsonError(await create(alice.secret, { name }), 422);
      expect(error.detail).toEqual([expect.objectContaining({ loc: ["body", "name"], type: "value_error" })]);
    }
    const noWrite = await keyOf(newOrg(), "alice", ["guardrails:read"]);
    await expectJsonError(await create(noWrite.secret), 403);
  });

  it("a reader sees the guardrail and its attachments, and cannot change, detach or delete it", async () => {
    const org = newOrg();
    const alice = await keyOf(org, "alice");
    const bob = await keyOf(org, "bob", ["guardrails:read", "guardrails:write", "admin:api-keys"]);
    const carol = await keyOf(org, "carol");
    const { id } = await created(alice.secret);
    expect((await attach(alice.secret, id, [{ scope: "key", key_id: alice.id }])).status).toBe(200);
    expect((await grant(alice.secret, id, "bob", "reader")).status).toBe(204);

    expect((await stack.call(bob.secret, `${PATH}/${id}`)).status).toBe(200);
    expect((await (await stack.call(bob.secret, PATH)).json()).data.map((g: { id: string }) => g.id)).toEqual(
      [id],
    );
    expect(await (await stack.call(bob.secret, `${PATH}/${id}/attachments`)).json()).toEqual({
      object: "guardrail.attachments",
      guardrail_id: id,
      attachments: [{ scope: "key", key_id: alice.id }],
    });
    // Even with admin:api-keys, a reader changes nothing of it.
    await expectJsonError(
      await stack.call(bob.secret, `${PATH}/${id}`, { method: "PATCH", json: { name: "bob's" } }),
      403,
    );
    await expectJsonError(await attach(bob.secret, id, []), 403);
    await expectJsonError(await attach(bob.secret, id, [{ scope: "organization" }]), 403);
    await expectJsonError(await stack.call(bob.secret, `${PATH}/${id}`, { method: "DELETE" }), 403);
    // One with no role does not learn it exists.
    await expectJsonError(await stack.call(carol.secret, `${PATH}/${id}`), 404);
    await expectJsonError(await stack.call(carol.secret, `${PATH}/${id}/attachments`), 404);
    expect((await (await stack.call(carol.secret, PATH)).json()).data).toEqual([]);

    // A writer changes it, but neither moves nor deletes it; what it does where it guards another user's
    // key (alice's) is as much the attachment's as detaching it, so that needs admin:api-keys too.
    expect((await grant(alice.secret, id, "carol", "writer")).status).toBe(204);
    const change = (json: unknown) => stack.call(carol.secret, `${PATH}/${id}`, { method: "PATCH", json });
    const refused = await expectJsonError(await change({ checks: [{ type: "secrets" }] }), 403);
    expect(refused).toMatchObject({ code: "missing_permission" });
    expect((await change({ name: "carol's name" })).status).toBe(200);
    await expectJsonError(await attach(carol.secret, id, []), 403);
    await expectJsonError(await stack.call(carol.secret, `${PATH}/${id}`, { method: "DELETE" }), 403);
    expect((await (await stack.call(alice.secret, `${PATH}/${id}/attachments`)).json()).attachments).toEqual([
      { scope: "key", key_id: alice.id },
    ]);
    // Detached, it guards nothing: the writer changes its checks.
    expect((await attach(alice.secret, id, [])).status).toBe(200);
    expect((await change({ checks: [{ type: "secrets" }] })).status).toBe(200);
    const after = await (await stack.call(alice.secret, `${PATH}/${id}`)).json();
    expect(after).toMatchObject({ name: "carol's name", checks: [{ type: "secrets" }] });
  });

  it("keeps organizations apart: another organization's guardrail is 404 to everything, and its keys cannot be named", async () => {
    const alice = await keyOf(newOrg(), "alice");
    const mallory = await keyOf(newOrg(), "alice", [
      "guardrails:read",
      "guardrails:write",
      "admin:api-keys",
      "authorization:write",
    ]);
    const { id } = await created(alice.secret);
    await expectJsonError(await stack.call(mallory.secret, `${PATH}/${id}`), 404);
    await expectJsonError(await stack.call(mallory.secret, `${PATH}/${id}/attachments`), 404);
    await expectJsonError(
      await stack.call(mallory.secret, `${PATH}/${id}`, { method: "PATCH", json: { name: "x" } }),
      404,
    );
    await expectJsonError(await attach(mallory.secret, id, [{ scope: "organization" }]), 404);
    await expectJsonError(await stack.call(mallory.secret, `${PATH}/${id}`, { method: "DELETE" }), 404);
    expect((await (await stack.call(mallory.secret, PATH)).json()).data).toEqual([]);
    // A public grant of the other organization reaches none of this one.
    const own = await created(mallory.secret);
    expect((await grant(mallory.secret, own.id, "*", "reader")).status).toBe(204);
    await expectJsonError(await stack.call(alice.secret, `${PATH}/${own.id}`), 404);
    // Its own guardrail cannot be attached to this organization's key: as if the key did not exist.
    const error = await expectJsonError(
      await attach(mallory.secret, own.id, [{ scope: "key", key_id: alice.id }]),
      422,
    );
    expect(error.detail).toEqual([
      expect.objectContaining({ loc: ["body", "attachments", 0, "key_id"], type: "value_error" }),
    ]);
    await expectJsonError(
      await attach(mallory.secret, own.id, [{ scope: "key", key_id: "key_nothere" }]),
      422,
    );
  });

  it("its owner attaches it to the owner's own key; the organization, a model or another user's key also need admin:api-keys", async () => {
    const org = newOrg();
    const alice = await keyOf(org, "alice");
    const aliceAdmin = await keyOf(org, "alice", ["guardrails:read", "guardrails:write", "admin:api-keys"]);
    const backend = await keyOf(org, "backend");
    const { id } = await created(alice.secret);

    const own = await attach(alice.secret, id, [
      { scope: "key", key_id: aliceAdmin.id },
      { scope: "key", key_id: alice.id },
      { scope: "key", key_id: alice.id },
    ]);
    expect(own.status).toBe(200);
    expect((await own.json()).attachments).toEqual(
      [alice.id, aliceAdmin.id].sort().map((key_id) => ({ scope: "key", key_id })),
    );
    for (const place of [
      { scope: "organization" },
      { scope: "model", model: "gpt-4o" },
      { scope: "key", key_id: backend.id },
    ]) {
      const refused = await expectJsonError(await attach(alice.secret, id, [place]), 403);
      expect(refused).toMatchObject({
        code: "missing_permission",
        message: expect.stringContaining("admin:api-keys"),
      });
    }
    // Nothing moved.
    expect(
      (await (await stack.call(alice.secret, `${PATH}/${id}/attachments`)).json()).attachments,
    ).toHaveLength(2);

    const everywhere = [
      { scope: "model", model: "gpt-4o" },
      { scope: "key", key_id: backend.id },
      { scope: "organization" },
    ];
    const byAdmin = await attach(aliceAdmin.secret, id, everywhere);
    expect(byAdmin.status).toBe(200);
    expect((await byAdmin.json()).attachments).toEqual([
      { scope: "organization" },
      { scope: "key", key_id: backend.id },
      { scope: "model", model: "gpt-4o" },
    ]);
    // Detaching from the organization (by a new list, or by deleting it) needs the same.
    await expectJsonError(await attach(alice.secret, id, everywhere.slice(0, 2)), 403);
    await expectJsonError(await stack.call(alice.secret, `${PATH}/${id}`, { method: "DELETE" }), 403);
    expect((await stack.call(alice.secret, `${PATH}/${id}`)).status).toBe(200);
    // So does emptying it where it stays attached: changing its checks, direction or action (not its name).
    const before = await (await stack.call(alice.secret, `${PATH}/${id}`)).json();
    for (const change of [
      { checks: [{ type: "ban_words", words: ["neverused"] }] },
      { action: "flag" },
      { applies_to: "output" },
    ]) {
      const refused = await expectJsonError(
        await stack.call(alice.secret, `${PATH}/${id}`, { method: "PATCH", json: change }),
        403,
      );
      expect(refused).toMatchObject({
        code: "missing_permission",
        message: expect.stringContaining("admin:api-keys"),
      });
    }
    expect(await (await stack.call(alice.secret, `${PATH}/${id}`)).json()).toEqual(before);
    const renamed = await stack.call(alice.secret, `${PATH}/${id}`, {
      method: "PATCH",
      json: { name: "renamed" },
    });
    expect(renamed.status).toBe(200);
    const byAdminChange = await stack.call(aliceAdmin.secret, `${PATH}/${id}`, {
      method: "PATCH",
      json: { action: "flag" },
    });
    expect(byAdminChange.status).toBe(200);
    expect((await byAdminChange.json()).action).toBe("flag");
    // Leaving the others as they are, the owner may still add and remove its own key.
    expect((await attach(alice.secret, id, [...everywhere, { scope: "key", key_id: alice.id }])).status).toBe(
      200,
    );
    expect((await attach(alice.secret, id, everywhere)).status).toBe(200);

    expect((await attach(aliceAdmin.secret, id, [])).status).toBe(200);
    expect((await (await stack.call(alice.secret, `${PATH}/${id}/attachments`)).json()).attachments).toEqual(
      [],
    );
    expect((await stack.call(alice.secret, `${PATH}/${id}`, { method: "DELETE" })).status).toBe(200);
  });

  it("audits every change: create, update, attach (naming where it is attached) and delete", async () => {
    const org = newOrg();
    const alice = await keyOf(org, "alice");
    const admin = await keyOf(org, "root", ["admin:api-keys"]);
    const { id } = await created(alice.secret);
    await stack.call(alice.secret, `${PATH}/${id}`, { method: "PATCH", json: { name: "v2" } });
    await attach(alice.secret, id, [{ scope: "key", key_id: alice.id }]);
    await stack.call(alice.secret, `${PATH}/${id}`, { method: "DELETE" });
    const res = await stack.call(admin.secret, `/api/v1/admin/audit?resourceType=guardrail&resourceId=${id}`);
    expect(res.status).toBe(200);
    const { data } = await res.json();
    const actor = { userId: "alice", keyId: alice.id, credential: "api_key" };
    expect(data).toEqual([
      expect.objectContaining({ action: "guardrail.delete", actor, outcome: "allowed" }),
      expect.objectContaining({
        action: "guardrail.attach",
        attachments: [`key:${alice.id}`],
        actor,
        outcome: "allowed",
      }),
      expect.objectContaining({ action: "guardrail.update", actor, outcome: "allowed" }),
      expect.objectContaining({
        action: "guardrail.create",
        resourceType: "guardrail",
        resourceId: id,
        actor,
        outcome: "allowed",
      }),
    ]);
    // A refused change leaves no record.
    const other = await created(alice.secret);
    await attach(alice.secret, other.id, [{ scope: "organization" }]);
    const { data: refused } = await (
      await stack.call(admin.secret, `/api/v1/admin/audit?resourceType=guardrail&resourceId=${other.id}`)
    ).json();
    expect(refused.map((r: { action: string }) => r.action)).toEqual(["guardrail.create"]);
  });

  it("tries a text against a guardrail's checks for a reader, naming each check that found something but never the text", async () => {
    const org = newOrg();
    const alice = await keyOf(org, "alice");
    const bob = await keyOf(org, "bob");
    const { id } = await created(alice.secret, {
      checks: [BAN, { type: "pii", kinds: ["email"] }],
      applies_to: "output",
      action: "redact",
    });
    const tryText = (secret: string, json: unknown) => stack.call(secret, `${PATH}/${id}/evaluate`, { json });

    const hit = await tryText(alice.secret, { text: "Mail ZORBLAX to a@example.com", direction: "input" });
    expect(hit.status).toBe(200);
    const body = await hit.json();
    expect(body).toEqual({
      object: "guardrail.evaluation",
      guardrail_id: id,
      direction: "input",
      decisions: [
        { check: "ban_words", check_index: 0, action: "redact", kinds: expect.any(Array) },
        { check: "pii", check_index: 1, action: "redact", kinds: ["email"] },
      ],
    });
    expect(JSON.stringify(body)).not.toMatch(/zorblax|example\.com/i);
    expect((await (await tryText(alice.secret, { text: "nothing here" })).json()).decisions).toEqual([]);

    // Without the reader role the guardrail is missing; with it, bob may try a text.
    expect((await tryText(bob.secret, { text: "zorblax" })).status).toBe(404);
    expect((await grant(alice.secret, id, "bob", "reader")).ok).toBe(true);
    expect((await (await tryText(bob.secret, { text: "zorblax" })).json()).decisions).toHaveLength(1);
    await expectJsonError(await tryText(alice.secret, { text: "x", direction: "sideways" }), 422);
  });
});
