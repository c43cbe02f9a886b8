import { DEFAULT_PERMISSIONS } from "@gw/core/permissions";
import { expectJsonError } from "@gw/test-kit";
import { describe, expect, it } from "vitest";
import { freshOrg, useGateway } from "../../../test/harness.ts";

// The key store is tested on a Redis Cluster in `src/api-keys/api-key-store.test.ts`; the admin API over it needs one server.
describe.each(["single"] as const)("on %s Redis", (topology) => {
  const gw = useGateway({}, undefined, topology);
  const KEYS = "/api/v1/admin/api-keys";

  async function admin(org = freshOrg()) {
    const { secret } = await gw.createKey({ org, owner: "root", permissions: ["admin:api-keys"] });
    return { org, secret };
  }

  describe("admin API for keys", () => {
    it("creates a key in the admin's org (201), shows its secret once, and the secret works", async () => {
      const { org, secret } = await admin();
      const res = await gw.call(KEYS, {
        method: "POST",
        bearer: secret,
        json: { owner: "bob", name: "ci", limits: { second: 5, day: 1000 } },
      });
      expect(res.status).toBe(201);
      const created = await res.json();
      expect(created).toMatchObject({
        id: expect.stringMatching(/^key_[0-9a-f]{24}$/),
        key: expect.stringMatching(/^gwsk_[A-Za-z0-9_-]{43}$/),
        org,
        owner: "bob",
        name: "ci",
        permissions: [...DEFAULT_PERMISSIONS],
        limits: { second: 5, day: 1000 },
        status: "active",
        expiresAt: null,
      });
      expect(created).not.toHaveProperty("hash");
      expect(created.permissions).not.toContain("admin:api-keys");
      const whoami = await gw.call("/api/v1/authentication/whoami", { bearer: created.key });
      expect(await whoami.json()).toMatchObject({ org, user: "bob", keyId: created.id });

      const list = await (await gw.call(`${KEYS}?org=${org}`, { bearer: secret })).json();
      expect(list.object).toBe("list");
      expect(list.data.map((k: { id: string }) => k.id)).toContain(created.id);
      expect(JSON.stringify(list)).not.toContain(created.key);
      expect(JSON.stringify(list)).not.toContain('"hash"');
    });

    it("updates permissions, limits (null removes a window) and name", async () => {
      const { secret } = await admin();
      const created = await (
        await gw.call(KEYS, {
          method: "POST",
          bearer: secret,
          json: { owner: "bob", limits: { second: 5, hour: 100 } },
        })
      ).json();
      const res = await gw.call(`${KEYS}/${created.id}`, {
        method: "PATCH",
        bearer: secret,
        json: { permissions: ["usage:read"], limits: { second: null, day: 9 }, name: "renamed" },
      });
      expect(res.status).toBe(200);
      expect(await res.json()).toMatchObject({
        permissions: ["usage:read"],
        limits: { hour: 100, day: 9 },
        name: "renamed",
      });
      const stored = await gw.store.get(created.id);
      expect(stored?.limits).toEqual({ hour: 100, day: 9 });
      const whoami = await (await gw.call("/api/v1/authentication/whoami", { bearer: created.key })).json();
      expect(whoami.permissions).toEqual(["usage:read"]);
    });

    it("keeps a model allowlist apart from permissions and limits: set, replaced, lifted with null", async () => {
      const { secret } = await admin();
      const created = await (
        await gw.call(KEYS, { method: "POST", bearer: secret, json: { owner: "bob", models: ["m-small"] } })
      ).json();
      expect(created).toMatchObject({ models: ["m-small"], limits: {} });
      const patch = (json: unknown) =>
        gw.call(`${KEYS}/${created.id}`, { method: "PATCH", bearer: secret, json });
      expect(await (await patch({ models: ["m-small", "m-large"] })).json()).toMatchObject({
        models: ["m-small", "m-large"],
      });
      expect((await gw.store.get(created.id))?.models).toEqual(["m-small", "m-large"]);
      expect((await (await patch({ models: null })).json()).models).toBeNull();
      for (const models of [[], ["a", "a"], [""]]) {
        const bad = await patch({ models });
        expect(bad.status, JSON.stringify(models)).toBe(422);
        expect((await bad.json()).detail[0].loc.slice(0, 2)).toEqual(["body", "models"]);
      }
      const plain = await (
        await gw.call(KEYS, { method: "POST", bearer: secret, json: { owner: "bob" } })
      ).json();
      expect(plain.models).toBeNull();
    });

    it("keeps a response cache setting: off by default, set on create, changed by PATCH, 422 for others", async () => {
      const { secret } = await admin();
      const plain = await (
        await gw.call(KEYS, { method: "POST", bearer: secret, json: { owner: "bob" } })
      ).json();
      expect(plain.cache).toBe("off");
      const created = await (
        await gw.call(KEYS, { method: "POST", bearer: secret, json: { owner: "bob", cache: "principal" } })
      ).json();
      expect(created.cache).toBe("principal");
      expect((await gw.store.get(created.id))?.cache).toBe("principal");
      const patch = (json: unknown) =>
        gw.call(`${KEYS}/${created.id}`, { method: "PATCH", bearer: secret, json });
      expect(await (await patch({ cache: "key" })).json()).toMatchObject({ cache: "key" });
      const list = await (await gw.call(KEYS, { bearer: secret })).json();
      expect(list.data.find((k: { id: string }) => k.id === created.id).cache).toBe("key");
      for (const cache of ["on", "", null, true, "KEY"]) {
        const bad = await patch({ cache });
        expect(bad.status, JSON.stringify(cache)).toBe(422);
        expect((await bad.json()).detail[0].loc).toEqual(["body", "cache"]);
        const refused = await gw.call(KEYS, {
          method: "POST",
          bearer: secret,
          json: { owner: "bob", cache },
        });
        expect(refused.status, JSON.stringify(cache)).toBe(422);
      }
      expect((await gw.store.get(created.id))?.cache).toBe("key");
    });

    it("revokes a key: DELETE returns it revoked and its secret stops working", async () => {
      const { secret } = await admin();
      const created = await (
        await gw.call(KEYS, { method: "POST", bearer: secret, json: { owner: "bob" } })
      ).json();
      expect((await gw.call("/api/v1/authentication/whoami", { bearer: created.key })).status).toBe(200);
      const res = await gw.call(`${KEYS}/${created.id}`, { method: "DELETE", bearer: secret });
      expect(res.status).toBe(200);
      expect(await res.json()).toMatchObject({
        id: created.id,
        status: "revoked",
        revokedAt: expect.any(String),
      });
      expect((await gw.call("/api/v1/authentication/whoami", { bearer: created.key })).status).toBe(401);
    });

    it("refuses keys without admin:api-keys with 403", async () => {
      const { secret } = await gw.createKey(); // every permission but admin
      for (const [method, path] of [
        ["POST", KEYS],
        ["GET", KEYS],
        ["PATCH", `${KEYS}/key_x`],
        ["DELETE", `${KEYS}/key_x`],
      ] as const) {
        const res = await gw.call(path, {
          method,
          bearer: secret,
          json: method === "POST" ? { owner: "x" } : undefined,
        });
        expect(res.status, `${method} ${path}`).toBe(403);
        expect(await res.json()).toEqual({
          error: "Forbidden",
          message: expect.stringContaining("admin:api-keys"),
          code: "missing_permission",
        });
      }
    });

    it("keeps an admin inside its own organization", async () => {
      const a = await admin();
      const b = await admin();
      const bKey = await gw.createKey({ org: b.org, owner: "carol" });

      const create = await gw.call(KEYS, {
        method: "POST",
        bearer: a.secret,
        json: { org: b.org, owner: "mallory" },
      });
      expect(create.status).toBe(403);
      expect((await gw.call(`${KEYS}?org=${b.org}`, { bearer: a.secret })).status).toBe(403);
      // Another org's key id is "not found", so ids do not leak across organizations.
      const patch = await gw.call(`${KEYS}/${bKey.record.id}`, {
        method: "PATCH",
        bearer: a.secret,
        json: { name: "x" },
      });
      expect(patch.status).toBe(404);
      expect(
        (await gw.call(`${KEYS}/${bKey.record.id}`, { method: "DELETE", bearer: a.secret })).status,
      ).toBe(404);
      expect((await gw.store.get(bKey.record.id))?.status).toBe("active");
      expect((await gw.call("/api/v1/authentication/whoami", { bearer: bKey.secret })).status).toBe(200);

      const own = await (await gw.call(KEYS, { bearer: a.secret })).json();
      expect(own.data.length).toBeGreaterThan(0);
      expect(own.data.every((k: { org: string }) => k.org === a.org)).toBe(true);
    });

    it("keeps one limits object: request windows, tokens, spend and endUser, patched window by window", async () => {
      const { secret } = await admin();
      const limits = {
        second: 5,
        tokens: { minute: 100_000, month: 5_000_000 },
        spend: { month: 50.5 },
        endUser: { minute: 3, tokens: { day: 50_000 }, spend: { day: 1 } },
      };
      const created = await (
        await gw.call(KEYS, { method: "POST", bearer: secret, json: { owner: "bob", limits } })
      ).json();
      expect(created.limits).toEqual(limits);
      const res = await gw.call(`${KEYS}/${created.id}`, {
        method: "PATCH",
        bearer: secret,
        json: { limits: { tokens: { minute: null, hour: 7 }, spend: null, endUser: { tokens: { day: 9 } } } },
      });
      expect(res.status).toBe(200);
      const expected = {
        second: 5,
        tokens: { hour: 7, month: 5_000_000 },
        endUser: { minute: 3, tokens: { day: 9 }, spend: { day: 1 } },
      };
      expect((await res.json()).limits).toEqual(expected);
      expect((await gw.store.get(created.id))?.limits).toEqual(expected);
      const cleared = await gw.call(`${KEYS}/${created.id}`, {
        method: "PATCH",
        bearer: secret,
        json: { limits: { endUser: null, tokens: { hour: null, month: null } } },
      });
      expect((await cleared.json()).limits).toEqual({ second: 5 });
    });

    it("refuses unknown units and windows, and spend below one billionth of a dollar (what spend is counted in)", async () => {
      const { secret } = await admin();
      const res = await gw.call(KEYS, {
        method: "POST",
        bearer: secret,
        json: {
          owner: "bob",
          limits: {
            tokens: { second: 5 },
            spend: { month: -1, day: 0.000_000_000_1 },
            endUser: { bytes: { day: 1 } },
          },
        },
      });
      expect(res.status).toBe(422);
      const types = (await res.json()).detail.map(
        (d: { loc: unknown[]; type: string }) => `${d.loc.join(".")}:${d.type}`,
      );
      expect(types.sort()).toEqual([
        "body.limits.endUser.bytes:extra_forbidden",
        "body.limits.spend.day:greater_than_equal",
        "body.limits.spend.month:greater_than_equal",
        "body.limits.tokens.second:extra_forbidden",
      ]);
    });

    it("sets the organization's end-user defaults, for its own organization only", async () => {
      const { org, secret } = await admin();
      const path = "/api/v1/admin/end-user-limits";
      expect(await (await gw.call(path, { bearer: secret })).json()).toEqual({ org, endUser: {} });
      const res = await gw.call(path, {
        method: "PATCH",
        bearer: secret,
        json: { tokens: { day: 50_000 }, spend: { month: 2 } },
      });
      expect(res.status).toBe(200);
      expect(await res.json()).toEqual({ org, endUser: { tokens: { day: 50_000 }, spend: { month: 2 } } });
      const other = await admin();
      expect(await (await gw.call(path, { bearer: other.secret })).json()).toEqual({
        org: other.org,
        endUser: {},
      });
      const { secret: plain } = await gw.createKey({ org, owner: "bob" });
      expect((await gw.call(path, { bearer: plain })).status).toBe(403);
      const bad = await gw.call(path, { method: "PATCH", bearer: secret, json: { endUser: { day: 1 } } });
      expect(bad.status).toBe(422);
    });

    it("answers 404 for an unknown id and 422 for a bad patch", async () => {
      const { secret } = await admin();
      expect(
        (await gw.call(`${KEYS}/key_000000000000000000000000`, { method: "DELETE", bearer: secret })).status,
      ).toBe(404);
      const created = await (
        await gw.call(KEYS, { method: "POST", bearer: secret, json: { owner: "bob" } })
      ).json();
      const res = await gw.call(`${KEYS}/${created.id}`, {
        method: "PATCH",
        bearer: secret,
        json: { limits: { week: 3 }, permissions: ["usage:read", "usage:read"] },
      });
      expect(res.status).toBe(422);
      const types = (await res.json()).detail.map(
        (d: { loc: unknown[]; type: string }) => `${d.loc.join(".")}:${d.type}`,
      );
      expect(types.sort()).toEqual(["body.limits.week:extra_forbidden", "body.permissions:value_error"]);
    });

    it.each([
      ["5000 characters", "u".repeat(5000), "string_too_long"],
      ["control characters", "%00%01", "string_pattern_mismatch"],
      ["non-ASCII", "caf%C3%A9", "string_pattern_mismatch"],
      ["empty", "", "string_too_short"],
    ])(
      "refuses a usage ?user= that is %s (422, as the other end-user filters)",
      async (_what, user, type) => {
        const { secret } = await admin();
        const created = await (
          await gw.call(KEYS, { method: "POST", bearer: secret, json: { owner: "bob" } })
        ).json();
        const res = await gw.call(`${KEYS}/${created.id}/usage?user=${user}`, { bearer: secret });
        const { detail } = await expectJsonError(res, 422);
        expect(detail).toEqual([expect.objectContaining({ loc: ["query", "user"], type })]);
        const ok = await gw.call(`${KEYS}/${created.id}/usage?user=${encodeURIComponent("end user 42")}`, {
          bearer: secret,
        });
        expect(ok.status).toBe(200);
      },
    );

    it.each([
      ["GET", "/usage"],
      ["PATCH", ""],
      ["DELETE", ""],
    ])(
      "%s of a key id that cannot exist (5000 characters) is refused without echoing it",
      async (method, tail) => {
        const { secret } = await admin();
        const id = `key_${"a".repeat(4996)}`;
        const res = await gw.call(`${KEYS}/${id}${tail}`, {
          method,
          bearer: secret,
          ...(method === "PATCH" ? { json: { name: "x" } } : {}),
        });
        expect(res.status).toBe(404);
        const text = await res.text();
        expect(text).not.toContain("a".repeat(300));
        expect(text.length).toBeLessThan(1000);
      },
    );

    it("shows a key past its expiresAt as expired (it is refused as expired), until its expiry is moved or it is revoked", async () => {
      const { org, secret } = await admin();
      const { record, secret: expiredSecret } = await gw.createKey({
        org,
        owner: "bob",
        expiresAt: "2020-01-01T00:00:00Z",
      });
      expect((await gw.call("/api/v1/authentication/whoami", { bearer: expiredSecret })).status).toBe(401);
      const listed = async () =>
        (await (await gw.call(KEYS, { bearer: secret })).json()).data.find(
          (k: { id: string }) => k.id === record.id,
        );
      expect(await listed()).toMatchObject({ status: "expired", expiresAt: "2020-01-01T00:00:00.000Z" });
      const renamed = await gw.call(`${KEYS}/${record.id}`, {
        method: "PATCH",
        bearer: secret,
        json: { name: "n" },
      });
      expect(await renamed.json()).toMatchObject({ status: "expired" });
      const extended = await gw.call(`${KEYS}/${record.id}`, {
        method: "PATCH",
        bearer: secret,
        json: { expiresAt: "2099-01-01T00:00:00Z" },
      });
      expect(await extended.json()).toMatchObject({ status: "active" });
      expect(await listed()).toMatchObject({ status: "active" });
      await gw.call(`${KEYS}/${record.id}`, { method: "PATCH", bearer: secret, json: { expiresAt: null } });
      await gw.store.update(record.id, { expiresAt: "2020-01-01T00:00:00Z" });
      const revoked = await gw.call(`${KEYS}/${record.id}`, { method: "DELETE", bearer: secret });
      expect(await revoked.json()).toMatchObject({ status: "revoked" });
      expect(await listed()).toMatchObject({ status: "revoked" });
    });

    it("refuses an expiry in the past", async () => {
      const { secret } = await admin();
      const res = await gw.call(KEYS, {
        method: "POST",
        bearer: secret,
        json: { owner: "bob", expiresAt: "2020-01-01T00:00:00Z" },
      });
      expect(res.status).toBe(422);
      expect((await res.json()).detail[0].loc).toEqual(["body", "expiresAt"]);
    });

    it.each([
      ["in the past", "2020-01-01T00:00:00Z", "datetime_future"],
      ["a date without a time", "2027-01-01", "datetime_parsing"],
      ["not a date", "tomorrow", "datetime_parsing"],
      ["a day that does not exist", "2030-02-30T00:00:00Z", "datetime_parsing"],
    ])(
      "an expiresAt %s is 422 %s on create and update, as the grant API says it",
      async (_what, at, type) => {
        const { secret } = await admin();
        const created = await (
          await gw.call(KEYS, { method: "POST", bearer: secret, json: { owner: "bob" } })
        ).json();
        for (const [method, path] of [
          ["POST", KEYS],
          ["PATCH", `${KEYS}/${created.id}`],
        ] as const) {
          const res = await gw.call(path, { method, bearer: secret, json: { owner: "bob", expiresAt: at } });
          const detail = (await expectJsonError(res, 422)).detail as { loc: string[]; type: string }[];
          expect(
            detail.find((d) => d.loc[1] === "expiresAt"),
            method,
          ).toMatchObject({
            loc: ["body", "expiresAt"],
            type,
            input: at,
          });
        }
      },
    );

    it("takes any RFC 3339 instant ahead as expiresAt (lower-case t and z, an offset) and shows it in UTC", async () => {
      const { secret } = await admin();
      const res = await gw.call(KEYS, {
        method: "POST",
        bearer: secret,
        json: { owner: "bob", expiresAt: "2031-06-30t12:00:00.5+02:00" },
      });
      expect(res.status).toBe(201);
      expect((await res.json()).expiresAt).toBe("2031-06-30T10:00:00.500Z");
    });
  });
});
