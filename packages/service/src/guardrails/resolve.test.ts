import { AuditLog } from "@gw/core/audit";
import { systemClock } from "@gw/core/clock";
import { testRedisClient } from "@gw/test-kit";
import { afterAll, describe, expect, it } from "vitest";
import { useStack } from "../../test/stack.ts";
import { GuardrailResolver, guardrailsChanged, type ResolverHooks } from "./resolve.ts";
import { GuardrailStore } from "./store.ts";

const PATH = "/api/v1/guardrails";

describe("resolveGuardrails: which guardrails apply to a call", () => {
  const stack = useStack();
  const clients: { disconnect(): void }[] = [];
  afterAll(() => {
    for (const c of clients) c.disconnect();
  });
  let orgCount = 0;
  const newOrg = () => `rs-org-${process.pid}-${++orgCount}-${Date.now().toString(36)}`;

  /** Another replica of the service's resolution: its own cache, the same PostgreSQL and Redis. */
  function replica(hooks: ResolverHooks = {}, redis = testRedisClient(stack.redisUrl)): GuardrailResolver {
    clients.push(redis);
    const store = new GuardrailStore(stack.db, new AuditLog(stack.db, { retentionMs: undefined }), {
      clock: systemClock,
      changed: (org) => guardrailsChanged(redis, org),
    });
    return new GuardrailResolver(store, redis, { clock: systemClock, hooks });
  }

  /** A replica that counts its loads of policies from PostgreSQL. */
  function countedReplica(): { replica: GuardrailResolver; loads: () => number } {
    let loads = 0;
    const other = replica();
    const store = (other as unknown as { store: GuardrailStore }).store;
    const load = store.attachedPolicies.bind(store);
    store.attachedPolicies = (o: string) => {
      loads++;
      return load(o);
    };
    return { replica: other, loads: () => loads };
  }

  async function setUp() {
    const org = newOrg();
    const admin = await stack.createKey({
      org,
      owner: "alice",
      permissions: ["guardrails:read", "guardrails:write", "admin:api-keys"],
    });
    const other = await stack.createKey({ org, owner: "bob" });
    const make = async (name: string, attachments: unknown[]) => {
      const res = await stack.call(admin.secret, PATH, {
        json: { name, checks: [{ type: "ban_words", words: [name] }], applies_to: "input", action: "block" },
      });
      expect(res.status).toBe(200);
      const { id } = (await res.json()) as { id: string };
      const put = await stack.call(admin.secret, `${PATH}/${id}/attachments`, {
        method: "PUT",
        json: { attachments },
      });
      expect(put.status).toBe(200);
      return id;
    };
    return { org, admin, other, make };
  }

  it("answers those attached to the organization, the caller's key and the model asked for, each once, oldest first", async () => {
    const { org, admin, other, make } = await setUp();
    const orgWide = await make("everyone", [{ scope: "organization" }]);
    const forKey = await make("admin-key", [{ scope: "key", key_id: admin.id }]);
    const forModel = await make("big-model", [{ scope: "model", model: "gpt-4o" }]);
    const twice = await make("twice", [{ scope: "organization" }, { scope: "model", model: "gpt-4o" }]);
    await make("nowhere", []);

    const ids = async (keyId: string, model: string) =>
      (await stack.guardrails.resolveGuardrails(org, keyId, model)).map((p) => p.id);
    expect(await ids(admin.id, "gpt-4o")).toEqual([orgWide, forKey, forModel, twice]);
    expect(await ids(other.id, "gpt-4o")).toEqual([orgWide, forModel, twice]);
    expect(await ids(other.id, "gpt-4o-mini")).toEqual([orgWide, twice]);
    const [policy] = await stack.guardrails.resolveGuardrails(org, other.id, "x");
    expect(policy).toEqual({
      id: orgWide,
      name: "everyone",
      version: 2, // created, then attached
      checks: [{ type: "ban_words", words: ["everyone"], patterns: [], leetspeak: false }],
      applies_to: "input",
      action: "block",
    });
    // Another organization's key, model or the same names there: nothing of this one.
    expect(await stack.guardrails.resolveGuardrails(newOrg(), admin.id, "gpt-4o")).toEqual([]);
  });

  it("a change through one replica is seen by the next resolution of another that had the old policies", async () => {
    const { org, admin, make } = await setUp();
    const id = await make("first", [{ scope: "organization" }]);
    const other = replica();
    expect((await other.resolve(org, admin.id, "m")).map((p) => p.name)).toEqual(["first"]);

    await stack.call(admin.secret, `${PATH}/${id}`, { method: "PATCH", json: { name: "second" } });
    expect((await other.resolve(org, admin.id, "m")).map((p) => p.name)).toEqual(["second"]);

    await stack.call(admin.secret, `${PATH}/${id}/attachments`, {
      method: "PUT",
      json: { attachments: [{ scope: "model", model: "m" }] },
    });
    expect((await other.resolve(org, admin.id, "m")).map((p) => p.name)).toEqual(["second"]);
    expect(await other.resolve(org, admin.id, "n")).toEqual([]);

    await stack.call(admin.secret, `${PATH}/${id}`, { method: "DELETE" });
    expect(await other.resolve(org, admin.id, "m")).toEqual([]);
  });

  it("policies loaded before a change and kept after it are never answered again", async () => {
    const { org, admin, make } = await setUp();
    const id = await make("before", [{ scope: "organization" }]);
    let raced = false;
    const other = replica({
      // The change lands (and tells every replica) after this replica loaded, before it keeps what it loaded.
      async beforeKeep() {
        if (raced) return;
        raced = true;
        const res = await stack.call(admin.secret, `${PATH}/${id}`, {
          method: "PATCH",
          json: { name: "after" },
        });
        expect(res.status).toBe(200);
      },
    });
    // The call in flight saw the policies of its start.
    expect((await other.resolve(org, admin.id, "m")).map((p) => p.name)).toEqual(["before"]);
    expect(raced).toBe(true);
    // Every later one sees the change.
    expect((await other.resolve(org, admin.id, "m")).map((p) => p.name)).toEqual(["after"]);
  });

  it("keeps an organization's policies between calls until a change (one version read, no load)", async () => {
    const { org, admin, make } = await setUp();
    await make("kept", [{ scope: "organization" }]);
    const { replica: other, loads } = countedReplica();
    await other.resolve(org, admin.id, "m");
    await other.resolve(org, admin.id, "m");
    await other.resolve(org, "key_other", "n");
    expect(loads()).toBe(1);
    await make("new", [{ scope: "organization" }]);
    expect((await other.resolve(org, admin.id, "m")).map((p) => p.name)).toEqual(["kept", "new"]);
    expect(loads()).toBe(2);
  });

  it("takes a version read earlier only as a read in flight: anything else (a caller's version after a queue's JSON) is read again, and the kept policies stay kept", async () => {
    const { org, admin, make } = await setUp();
    await make("first", [{ scope: "organization" }]);
    const { replica: other, loads } = countedReplica();
    expect((await other.resolve(org, admin.id, "m")).map((p) => p.name)).toEqual(["first"]);
    await make("second", [{ scope: "organization" }]);
    // What a Promise becomes once serialized: not a version, so Redis is asked and the change seen.
    const serialized = JSON.parse(JSON.stringify({ v: Promise.resolve("0") })).v as never;
    expect((await other.resolve(org, admin.id, "m", serialized)).map((p) => p.name)).toEqual([
      "first",
      "second",
    ]);
    expect(loads()).toBe(2);
    // Kept under the version Redis gave: the next call loads nothing.
    expect((await other.resolve(org, admin.id, "m")).map((p) => p.name)).toEqual(["first", "second"]);
    expect(loads()).toBe(2);
  });

  it("without Redis, reads the policies from PostgreSQL at every call: never an older answer", async () => {
    const { org, admin, make } = await setUp();
    const id = await make("first", [{ scope: "organization" }]);
    const lost = testRedisClient(stack.redisUrl);
    const other = replica({}, lost);
    expect((await other.resolve(org, admin.id, "m")).map((p) => p.name)).toEqual(["first"]);
    lost.disconnect();
    await expect(lost.get("x")).rejects.toThrow();
    await stack.call(admin.secret, `${PATH}/${id}`, { method: "PATCH", json: { name: "second" } });
    expect((await other.resolve(org, admin.id, "m")).map((p) => p.name)).toEqual(["second"]);
  });
});
