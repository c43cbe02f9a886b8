import { expectJsonError } from "@gw/test-kit";
import { describe, expect, it, vi } from "vitest";
import type { OnBehalfOfPolicy } from "../src/api-keys/on-behalf-of.ts";
import { freshOrg, useGateway } from "./harness.ts";
import { runCli } from "./run-cli.ts";

const gw = useGateway();
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
      ["another field", { prefixes: ["a"], users: ["b"] }, ["body.onBehalfOf.users:extra_forbidden"]],
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
    });

    it.each([
      ["everyone", /--on-behalf-of expects any, none or prefix:P/],
      ["prefix:acme-,bob", /--on-behalf-of expects any, none or prefix:P/],
      ["prefix:", /onBehalfOf\.prefixes\.0: String should have at least 1 character/],
    ])("refuses --on-behalf-of %s with exit code 2", async (value, message) => {
      const out = await keys(["create", "--org", freshOrg(), "--owner", "x", "--on-behalf-of", value]);
      expect(out.code).toBe(2);
      expect(out.stdout).toBe("");
      expect(out.stderr).toMatch(message);
    });
  });
});
