import type { OnBehalfOfPolicy } from "@gw/core/on-behalf-of";
import { expectJsonError } from "@gw/test-kit";
import { type FakeMcpServer, startFakeMcpServer } from "@gw/test-kit/mcp-upstream";
import { describe, expect, it, vi } from "vitest";
import { freshOrg, useGateway } from "./harness.ts";
import { caller, MCP_ENV } from "./mcp/mcp-helpers.ts";
import { runCli } from "./run-cli.ts";

const gw = useGateway(MCP_ENV);
const WHOAMI = "/api/v1/authentication/whoami";
const EXCHANGE = "/api/v1/authentication/api-keys/exchange-token";
const ADMIN_KEYS = "/api/v1/admin/api-keys";

const PREFIXES: OnBehalfOfPolicy = { prefixes: ["acme-", "svc-"] };

/** whoami as `user` (none: no X-On-Behalf-Of) with `bearer`: the status, and the principal's user when 200. */
async function actAs(
  bearer: string,
  user?: string,
): Promise<{ status: number; user?: string; message?: string }> {
  const res = await gw.call(WHOAMI, {
    bearer,
    headers: user === undefined ? {} : { "x-on-behalf-of": user },
  });
  const body = await res.json();
  return res.status === 200
    ? { status: 200, user: body.user }
    : { status: res.status, message: body.message };
}

async function exchange(secret: string, externalUserId: string) {
  return gw.call(EXCHANGE, {
    method: "POST",
    bearer: secret,
    json: { audience: gw.publicUrl, externalUserId },
  });
}

describe("a key's policy for acting on behalf of end users", () => {
  // Policy, X-On-Behalf-Of (undefined: none sent), allowed. The key's owner is alice.
  it.each<[OnBehalfOfPolicy | undefined, string | undefined, boolean]>([
    [undefined, "bob", true],
    ["any", "bob", true],
    ["none", undefined, true],
    ["none", "alice", true],
    ["none", "bob", false],
    [PREFIXES, "acme-bob", true],
    [PREFIXES, "svc-batch", true],
    [PREFIXES, undefined, true],
    [PREFIXES, "alice", true],
    [PREFIXES, "bob", false],
    [PREFIXES, "acme", false],
    [PREFIXES, "ACME-bob", false],
    [PREFIXES, "x-acme-bob", false],
  ])("%j with X-On-Behalf-Of %j: allowed %s", async (policy, user, allowed) => {
    const { secret } = await gw.createKey({ owner: "alice", ...(policy ? { onBehalfOf: policy } : {}) });
    const answer = await actAs(secret, user);
    if (allowed) {
      expect(answer).toEqual({ status: 200, user: user ?? "alice" });
      return;
    }
    const res = await gw.call(WHOAMI, { bearer: secret, headers: { "x-on-behalf-of": user! } });
    expect(await expectJsonError(res, 403)).toEqual({
      error: "Forbidden",
      message: expect.stringMatching(
        new RegExp(
          `^X-On-Behalf-Of '${user}' is outside this API key's X-On-Behalf-Of policy: it may act for `,
        ),
      ),
      code: "forbidden",
    });
  });

  it("says what the key may act for in the 403", async () => {
    const none = await gw.createKey({ owner: "alice", onBehalfOf: "none" });
    expect((await actAs(none.secret, "bob")).message).toBe(
      "X-On-Behalf-Of 'bob' is outside this API key's X-On-Behalf-Of policy: it may act for no end user but its owner",
    );
    const prefixed = await gw.createKey({ owner: "alice", onBehalfOf: PREFIXES });
    expect((await actAs(prefixed.secret, "bob")).message).toBe(
      "X-On-Behalf-Of 'bob' is outside this API key's X-On-Behalf-Of policy: it may act for only end users whose id starts with 'acme-', 'svc-'",
    );
  });

  it("keys stored before the policy existed act for any end user, and show it as any", async () => {
    const { record, secret } = await gw.createKey({ owner: "alice" });
    const { onBehalfOf: _, ...older } = record;
    await gw.redis.set(`gw:apikey:${record.id}`, JSON.stringify(older));
    expect((await gw.store.get(record.id))?.onBehalfOf).toBeUndefined();
    await vi.waitFor(
      async () => expect(await actAs(secret, "anyone")).toEqual({ status: 200, user: "anyone" }),
      { timeout: 10_000 },
    );
    const admin = await gw.createKey({ org: record.org, owner: "root", permissions: ["admin:api-keys"] });
    const listed = await (await gw.call(ADMIN_KEYS, { bearer: admin.secret })).json();
    expect(listed.data.find((k: { id: string }) => k.id === record.id)).toMatchObject({ onBehalfOf: "any" });
  });

  describe("tokens exchanged from the key", () => {
    it("are minted only for end users within the policy (403 naming externalUserId and X-On-Behalf-Of)", async () => {
      const { secret } = await gw.createKey({ owner: "alice", onBehalfOf: PREFIXES });
      const refused = await exchange(secret, "bob");
      expect(await expectJsonError(refused, 403)).toEqual({
        error: "Forbidden",
        message:
          "externalUserId 'bob' is outside this API key's X-On-Behalf-Of policy: it may act for only end users whose id starts with 'acme-', 'svc-'",
        code: "forbidden",
      });
      for (const user of ["acme-bob", "alice"]) {
        const res = await exchange(secret, user);
        expect(res.status).toBe(200);
        const { token } = await res.json();
        expect(await actAs(token)).toEqual({ status: 200, user });
        expect(await actAs(token, user)).toEqual({ status: 200, user });
      }
      const none = await gw.createKey({ owner: "alice", onBehalfOf: "none" });
      expect((await exchange(none.secret, "acme-bob")).status).toBe(403);
      expect((await exchange(none.secret, "alice")).status).toBe(200);
    });

    it("stop working for a subject the key's policy no longer covers", async () => {
      const { record, secret } = await gw.createKey({ owner: "alice" });
      const { token } = await (await exchange(secret, "bob")).json();
      const { token: acme } = await (await exchange(secret, "acme-bob")).json();
      expect(await actAs(token)).toEqual({ status: 200, user: "bob" });
      await gw.store.update(record.id, { onBehalfOf: PREFIXES });
      await vi.waitFor(async () => expect((await actAs(token)).status).toBe(403), { timeout: 10_000 });
      const res = await gw.call(WHOAMI, { bearer: token });
      expect((await expectJsonError(res, 403)).message).toMatch(
        /^The token's subject 'bob' is outside this API key's X-On-Behalf-Of policy/,
      );
      expect(await actAs(acme)).toEqual({ status: 200, user: "acme-bob" });
    });
  });

  describe("set through the admin API", () => {
    it("at creation and by PATCH, shown on the key", async () => {
      const org = freshOrg();
      const admin = await gw.createKey({ org, owner: "root", permissions: ["admin:api-keys"] });
      const created = await gw.call(ADMIN_KEYS, {
        method: "POST",
        bearer: admin.secret,
        json: { owner: "svc", onBehalfOf: { prefixes: ["acme-"] } },
      });
      expect(created.status).toBe(201);
      const key = await created.json();
      expect(key.onBehalfOf).toEqual({ prefixes: ["acme-"] });
      expect((await actAs(key.key, "globex-eve")).status).toBe(403);
      expect((await actAs(key.key, "acme-eve")).status).toBe(200);

      const patched = await gw.call(`${ADMIN_KEYS}/${key.id}`, {
        method: "PATCH",
        bearer: admin.secret,
        json: { onBehalfOf: "none" },
      });
      expect(await patched.json()).toMatchObject({ id: key.id, onBehalfOf: "none" });
      await vi.waitFor(async () => expect((await actAs(key.key, "acme-eve")).status).toBe(403), {
        timeout: 10_000,
      });
      // A PATCH that does not name it keeps it.
      const renamed = await gw.call(`${ADMIN_KEYS}/${key.id}`, {
        method: "PATCH",
        bearer: admin.secret,
        json: { name: "svc key" },
      });
      expect(await renamed.json()).toMatchObject({ name: "svc key", onBehalfOf: "none" });
      const plain = await gw.call(ADMIN_KEYS, { method: "POST", bearer: admin.secret, json: { owner: "x" } });
      expect((await plain.json()).onBehalfOf).toBe("any");
    });

    it.each<[string, unknown, string[]]>([
      ["an unknown mode", "some", ["body.onBehalfOf:enum"]],
      ["no prefixes", { prefixes: [] }, ["body.onBehalfOf.prefixes:too_short"]],
      ["an empty prefix", { prefixes: [""] }, ["body.onBehalfOf.prefixes.0:string_too_short"]],
      ["a repeated prefix", { prefixes: ["a", "a"] }, ["body.onBehalfOf.prefixes:value_error"]],
      [
        "33 prefixes",
        { prefixes: Array.from({ length: 33 }, (_, i) => `p${i}`) },
        ["body.onBehalfOf.prefixes:too_long"],
      ],
      ["another field", { prefixes: ["a"], names: ["b"] }, ["body.onBehalfOf.names:extra_forbidden"]],
      ["neither prefixes nor users", {}, ["body.onBehalfOf:value_error"]],
      ["no users", { users: [] }, ["body.onBehalfOf.users:too_short"]],
      ["an empty user", { prefixes: ["a"], users: [""] }, ["body.onBehalfOf.users.0:string_too_short"]],
      ["a repeated user", { users: ["alice", "alice"] }, ["body.onBehalfOf.users:value_error"]],
      [
        "101 users",
        { users: Array.from({ length: 101 }, (_, i) => `u${i}`) },
        ["body.onBehalfOf.users:too_long"],
      ],
      [
        "a user that is not a user id",
        { users: ["al\nice"] },
        ["body.onBehalfOf.users.0:string_pattern_mismatch"],
      ],
      ["a list", ["acme-"], ["body.onBehalfOf:enum"]],
    ])("refuses %s with 422 at its loc", async (_name, onBehalfOf, expected) => {
      const admin = await gw.createKey({ owner: "root", permissions: ["admin:api-keys"] });
      for (const [method, path, json] of [
        ["POST", ADMIN_KEYS, { owner: "x", onBehalfOf }],
        ["PATCH", `${ADMIN_KEYS}/${admin.record.id}`, { onBehalfOf }],
      ] as const) {
        const res = await gw.call(path, { method, bearer: admin.secret, json });
        const body = await expectJsonError(res, 422);
        expect(
          (body.detail as { loc: string[]; type: string }[]).map((d) => `${d.loc.join(".")}:${d.type}`),
        ).toEqual(expected);
      }
    });
  });

  describe("set with pnpm keys", () => {
    const keys = (args: string[]) => runCli("keys", args, { REDIS_URL: gw.redisUrl });

    it("--on-behalf-of any | none | prefix:P,prefix:P on create and update", async () => {
      const org = freshOrg();
      const out = await keys([
        "create",
        "--org",
        org,
        "--owner",
        "svc",
        "--on-behalf-of",
        "prefix:acme-,prefix:svc-",
      ]);
      expect(out.code).toBe(0);
      const created = JSON.parse(out.stdout);
      expect(created.onBehalfOf).toEqual({ prefixes: ["acme-", "svc-"] });
      expect((await actAs(created.key, "bob")).status).toBe(403);
      expect((await actAs(created.key, "svc-bob")).status).toBe(200);

      const none = await keys(["update", created.id, "--on-behalf-of", "none"]);
      expect(JSON.parse(none.stdout).onBehalfOf).toBe("none");
      const any = await keys(["update", created.id, "--on-behalf-of", "any"]);
      expect(JSON.parse(any.stdout).onBehalfOf).toBe("any");
      const plain = JSON.parse((await keys(["create", "--org", org, "--owner", "x"])).stdout);
      expect(plain.onBehalfOf).toBe("any");
      const listed = await keys(["update", created.id, "--on-behalf-of", "user:x,prefix:acme-,user:svc-bob"]);
      expect(JSON.parse(listed.stdout).onBehalfOf).toEqual({ prefixes: ["acme-"], users: ["x", "svc-bob"] });
      // x owns a key of the organization: only a users entry lets another key act for them.
      expect((await actAs(created.key, "x")).status).toBe(200);
      const named = await keys(["update", created.id, "--on-behalf-of", "user:svc-bob"]);
      expect(JSON.parse(named.stdout).onBehalfOf).toEqual({ users: ["svc-bob"] });
    });

    it.each([
      ["everyone", /--on-behalf-of expects any, none or prefix:P/],
      ["prefix:acme-,bob", /--on-behalf-of expects any, none or prefix:P/],
      ["prefix:", /onBehalfOf\.prefixes\.0: String should have at least 1 character/],
      ["user:", /onBehalfOf\.users\.0: String should have at least 1 character/],
      ["users:alice", /--on-behalf-of expects any, none or prefix:P/],
    ])("refuses --on-behalf-of %s with exit code 2", async (value, message) => {
      const out = await keys(["create", "--org", freshOrg(), "--owner", "x", "--on-behalf-of", value]);
      expect(out.code).toBe(2);
      expect(out.stdout).toBe("");
      expect(out.stderr).toMatch(message);
    });
  });
});

describe("no key acts as another key's owner", () => {
  const WHOAMI_AS = (user: string) => ({ headers: { "x-on-behalf-of": user } });
  const ownerRefusal = (source: string, user: string) =>
    `${source} '${user}' owns an API key of this organization, and this API key's X-On-Behalf-Of policy does not name them in users`;

  /** An organization whose root key alice owns, and bob's key of it with `policy`. */
  async function rootAndBob(policy?: OnBehalfOfPolicy) {
    const org = freshOrg();
    const root = await gw.createKey({ org, owner: "alice", permissions: ["admin:api-keys"] });
    const bob = await gw.createKey({ org, owner: "bob", ...(policy ? { onBehalfOf: policy } : {}) });
    return { org, root, bob };
  }

  /** The organization's `act_as_key_owner` records, newest first, read with its root key. */
  async function actingRecords(rootSecret: string) {
    const res = await gw.call(`${"/api/v1/admin/audit"}?action=act_as_key_owner`, { bearer: rootSecret });
    expect(res.status).toBe(200);
    return (await res.json()).data as Record<string, unknown>[];
  }

  it.each<[string, OnBehalfOfPolicy | undefined]>([
    ["the default policy", undefined],
    ["any", "any"],
    ["a prefix the owner's id starts with", { prefixes: ["al"] }],
    ["users naming someone else", { prefixes: ["al"], users: ["carol"] }],
  ])("bob's key with %s cannot act as alice, who owns the root key: 403 by header", async (_name, policy) => {
    const { bob } = await rootAndBob(policy);
    const res = await gw.call(WHOAMI, { bearer: bob.secret, ...WHOAMI_AS("alice") });
    expect(await expectJsonError(res, 403)).toEqual({
      error: "Forbidden",
      message: ownerRefusal("X-On-Behalf-Of", "alice"),
      code: "forbidden",
    });
    // Whoever owns no key is still acted for as the policy says.
    expect(await actAs(bob.secret, "albert")).toEqual({ status: 200, user: "albert" });
  });

  it("nor on any route: alice's conversation's grants, a grant on it", async () => {
    const { root, bob } = await rootAndBob();
    await gw.authorization.createOwnership(
      {
        org: root.record.org,
        user: "alice",
        keyId: root.record.id,
        permissions: [],
        credential: "api_key",
        onBehalfOf: false,
      },
      { type: "conversation", id: "conv_1" },
    );
    for (const [path, init] of [
      ["/api/v1/authorization/llm/resources/conversation/conv_1/grants", {}],
      [
        "/api/v1/authorization/llm/grant",
        {
          method: "POST",
          json: { resourceType: "conversation", resourceId: "conv_1", userId: "bob", role: "owner" },
        },
      ],
    ] as const) {
      const res = await gw.call(path, { bearer: bob.secret, ...WHOAMI_AS("alice"), ...init });
      expect((await expectJsonError(res, 403)).message, path).toBe(ownerRefusal("X-On-Behalf-Of", "alice"));
    }
  });

  it("nor get a token for alice at the exchange", async () => {
    const { bob } = await rootAndBob();
    const res = await exchange(bob.secret, "alice");
    expect(await expectJsonError(res, 403)).toEqual({
      error: "Forbidden",
      message: ownerRefusal("externalUserId", "alice"),
      code: "forbidden",
    });
  });

  it("a token issued for alice before she owned a key stops working the moment her key exists", async () => {
    const org = freshOrg();
    const bob = await gw.createKey({ org, owner: "bob" });
    const { token } = await (await exchange(bob.secret, "alice")).json();
    expect(await actAs(token)).toEqual({ status: 200, user: "alice" });
    await gw.createKey({ org, owner: "alice" });
    const res = await gw.call(WHOAMI, { bearer: token });
    expect((await expectJsonError(res, 403)).message).toBe(ownerRefusal("The token's subject", "alice"));
  });

  it("the owner of a revoked or expired key stays protected", async () => {
    const org = freshOrg();
    const carol = await gw.createKey({ org, owner: "carol" });
    await gw.store.revoke(carol.record.id);
    await gw.createKey({ org, owner: "dave", expiresAt: new Date(Date.now() + 1_000).toISOString() });
    const bob = await gw.createKey({ org, owner: "bob" });
    for (const user of ["carol", "dave"]) expect((await actAs(bob.secret, user)).status, user).toBe(403);
  });

  it("keys made before owners were recorded are covered: the organization's set is filled from its keys", async () => {
    const { org, bob } = await rootAndBob();
    await gw.redis.del(`gw:org:${org}:key-owners`);
    expect((await actAs(bob.secret, "alice")).message).toBe(ownerRefusal("X-On-Behalf-Of", "alice"));
    expect(await actAs(bob.secret, "carol")).toEqual({ status: 200, user: "carol" });
    expect((await gw.redis.smembers(`gw:org:${org}:key-owners`)).sort()).toEqual(["", "alice", "bob"]);
  });

  it("a key owns nothing of another organization: alice of another organization is an end user here", async () => {
    const { bob } = await rootAndBob();
    const elsewhere = await gw.createKey({ owner: "carol" });
    expect(elsewhere.record.org).not.toBe(bob.record.org);
    expect(await actAs(bob.secret, "carol")).toEqual({ status: 200, user: "carol" });
  });

  it("not through the MCP proxy either: bob's key cannot call alice's tools as alice", async () => {
    const upstream: FakeMcpServer = await startFakeMcpServer();
    try {
      const { root, bob } = await rootAndBob();
      const alice = await gw.createKey({
        org: root.record.org,
        owner: "alice",
        permissions: ["mcp:read", "mcp:write", "mcp:call"],
      });
      const registered = await caller(gw.url, alice.secret)("alice", "/api/v1/mcp/servers", {
        json: { name: "docs", url: upstream.url },
      });
      expect(registered.status).toBe(201);
      const { id } = await registered.json();
      const res = await caller(gw.url, bob.secret)("alice", `/api/v1/mcp/servers/${id}/mcp`, {
        json: {
          jsonrpc: "2.0",
          id: 1,
          method: "tools/call",
          params: { name: "delete_file", arguments: { path: "/x" } },
        },
      });
      expect((await expectJsonError(res, 403)).message).toBe(ownerRefusal("X-On-Behalf-Of", "alice"));
      expect(upstream.calls).toEqual([]);
    } finally {
      await upstream.close();
    }
  });

  it("alice named in users: bob's key acts as her, by header and by token, and each request is audited", async () => {
    const { root, bob } = await rootAndBob({ users: ["alice"], prefixes: ["acme-"] });
    const res = await gw.call(WHOAMI, { bearer: bob.secret, ...WHOAMI_AS("alice") });
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({ user: "alice", endUser: true, actsAsKeyOwner: true });
    const requestId = res.headers.get("x-request-id");
    expect(await actingRecords(root.secret)).toEqual([
      expect.objectContaining({
        organization: root.record.org,
        actor: { userId: "bob", keyId: bob.record.id, credential: "api_key" },
        action: "act_as_key_owner",
        resourceType: "user",
        resourceId: "alice",
        request: "GET /api/v1/authentication/whoami",
        outcome: "allowed",
        requestId,
      }),
    ]);

    const exchanged = await exchange(bob.secret, "alice");
    expect(exchanged.status).toBe(200);
    const { token } = await exchanged.json();
    const withToken = await gw.call(WHOAMI, { bearer: token });
    expect(await withToken.json()).toMatchObject({ user: "alice", actsAsKeyOwner: true });
    const records = await actingRecords(root.secret);
    expect(records.map((r) => [r.request, (r.actor as { credential: string }).credential])).toEqual([
      ["GET /api/v1/authentication/whoami", "jwt"],
      ["POST /api/v1/authentication/api-keys/exchange-token", "api_key"],
      ["GET /api/v1/authentication/whoami", "api_key"],
    ]);

    // An end user who owns no key, or the key's own owner, is not a key owner acted for: nothing recorded.
    const plain = await gw.call(WHOAMI, { bearer: bob.secret, ...WHOAMI_AS("acme-eve") });
    expect(await plain.json()).toMatchObject({ user: "acme-eve", actsAsKeyOwner: false });
    expect(await actAs(bob.secret, "bob")).toEqual({ status: 200, user: "bob" });
    expect(await actingRecords(root.secret)).toHaveLength(3);
  });

  it("a PATCH that drops alice from users stops the key acting as her", async () => {
    const { bob } = await rootAndBob({ users: ["alice"] });
    expect(await actAs(bob.secret, "alice")).toEqual({ status: 200, user: "alice" });
    await gw.store.update(bob.record.id, { onBehalfOf: "any" });
    await vi.waitFor(async () => expect((await actAs(bob.secret, "alice")).status).toBe(403), {
      timeout: 10_000,
    });
  });

  it("through a Redis outage, an organization's key owners as last read still decide (within API_KEY_STALE_IF_ERROR_MS); one never read fails closed with 503; acting as the key's owner goes on", async () => {
    const { bob } = await rootAndBob();
    expect(await actAs(bob.secret, "carol")).toEqual({ status: 200, user: "carol" });
    // Another organization whose key has acted only as its owner: its key owners were never read.
    const dave = await gw.createKey({ org: freshOrg(), owner: "dave" });
    expect(await actAs(dave.secret)).toEqual({ status: 200, user: "dave" });
    await gw.redisServer.halt();
    try {
      expect(await actAs(bob.secret, "carol")).toEqual({ status: 200, user: "carol" });
      expect(await actAs(bob.secret, "alice")).toMatchObject({ status: 403 });
      const res = await gw.call(WHOAMI, { bearer: dave.secret, ...WHOAMI_AS("erin") });
      expect(await expectJsonError(res, 503)).toMatchObject({ code: "api_key_store_unavailable" });
      expect(await actAs(dave.secret)).toEqual({ status: 200, user: "dave" });
    } finally {
      await gw.redisServer.restart();
    }
  });
});
