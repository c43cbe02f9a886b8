import type { Limits } from "@gw/core/limits";
import { CountingWindows } from "@gw/core/windows";
import { describeEachTopology } from "@gw/test-kit";
import { describe, expect, it } from "vitest";
import { freshOrg, useGateway } from "../../test/harness.ts";
import { tally } from "../../test/tally.ts";

describeEachTopology("on %s Redis", (topology) => {
  // Exactness is what these tests check: a loaded machine's slow Redis must not make the gateway decide in
  // memory (the fail mode, tested in rate-limit-resilience.test.ts), which would admit per replica.
  const exact = { RATE_LIMIT_REDIS_TIMEOUT_MS: "5000" };
  const gw = useGateway(exact, undefined, topology);
  const WHOAMI = "/api/v1/authentication/whoami";

  async function burst(secret: string, n: number, path = WHOAMI) {
    return Promise.all(Array.from({ length: n }, () => gw.call(path, { bearer: secret })));
  }
  const statuses = tally;

  /**
   * A fresh key with `limits` and a concurrent burst of `n` requests that lands
   * in one second window (what per-second exactness is about): the key's
   * second window is opened in Redis beforehand for a minute, so however
   * slowly a loaded machine serves the burst, the window cannot turn over.
   */
  async function burstInOneWindow(limits: Limits, n: number) {
    const key = await gw.createKey({ limits });
    await gw.redis.set(`gw:rl:{${key.record.id}}:second`, 0, "PX", 60_000);
    return { ...key, responses: await burst(key.secret, n) };
  }
  const standing = async (keyId: string, limits: Limits) =>
    Object.fromEntries(
      (await new CountingWindows(gw.redis).peek(keyId, undefined, limits)).map((w) => [
        w.window,
        w.limit - w.remaining,
      ]),
    );

  describe("per-key quotas", () => {
    it("50 concurrent requests against second=5, day=1000: exactly 5 pass, 45 get the exact 429, the day shows 5", async () => {
      const limits = { second: 5, day: 1000 };
      const { record, responses } = await burstInOneWindow(limits, 50);
      expect(statuses(responses)).toEqual({ 200: 5, 429: 45 });
      for (const res of responses.filter((r) => r.status === 429)) {
        expect(res.headers.get("content-type")).toBe("application/json; charset=utf-8");
        expect(await res.text()).toBe('{"error":"Rate limit exceeded"}');
        expect(res.headers.get("retry-after")).toMatch(/^[1-9]\d*$/);
        expect(Number(res.headers.get("retry-after"))).toBeLessThanOrEqual(60); // the second window's reset
        expect(res.headers.get("ratelimit-policy")).toBe('"second";q=5;w=1, "day";q=1000;w=86400');
      }
      expect(await standing(record.id, limits)).toEqual({ second: 5, day: 5 });
    });

    it.each([
      ["minute", 7],
      ["hour", 4],
      ["day", 6],
    ] as const)("admits exactly the %s quota (%i) under a concurrent burst", async (window, quota) => {
      const { record, secret } = await gw.createKey({ limits: { [window]: quota } });
      expect(statuses(await burst(secret, quota * 3))).toEqual({ 200: quota, 429: quota * 2 });
      expect(await standing(record.id, { [window]: quota })).toEqual({ [window]: quota });
    });

    it("a burst refused by the second window burns nothing of the hour's quota", async () => {
      const limits = { second: 3, hour: 100 };
      const { record, responses } = await burstInOneWindow(limits, 40);
      expect(statuses(responses)).toEqual({ 200: 3, 429: 37 });
      expect(await standing(record.id, limits)).toEqual({ second: 3, hour: 3 });
    });

    it("second + hour together: the hour caps what the seconds would allow, with a long Retry-After", async () => {
      const limits = { second: 4, hour: 6 };
      const { record, secret, responses } = await burstInOneWindow(limits, 4);
      expect(statuses(responses)).toEqual({ 200: 4 });
      await gw.redis.del(`gw:rl:{${record.id}}:second`); // the second window ends
      const second = await burst(secret, 10);
      expect(statuses(second)).toEqual({ 200: 2, 429: 8 });
      const refused = second.find((r) => r.status === 429)!;
      expect(Number(refused.headers.get("retry-after"))).toBeGreaterThan(3_000);
      expect(refused.headers.get("ratelimit")).toMatch(/^"hour";r=0;t=\d+$/);
    });

    it("after Retry-After a refused key is admitted again (the real second window)", async () => {
      const { secret } = await gw.createKey({ limits: { second: 2 } });
      const first = await burst(secret, 3);
      const refused = first.find((r) => r.status === 429)!;
      await new Promise((r) => setTimeout(r, Number(refused.headers.get("retry-after")) * 1000 + 50));
      expect((await gw.call(WHOAMI, { bearer: secret })).status).toBe(200);
    });

    it("every response of a limited key carries RateLimit-Policy and the tightest RateLimit", async () => {
      const { secret } = await gw.createKey({ limits: { second: 5, minute: 100 } });
      await gw.call(WHOAMI, { bearer: secret });
      const res = await gw.call("/api/v1/no/such/route", { bearer: secret });
      expect(res.status).toBe(404);
      expect(res.headers.get("ratelimit-policy")).toBe('"second";q=5;w=1, "minute";q=100;w=60');
      expect(res.headers.get("ratelimit")).toBe('"second";r=3;t=1');
    });

    it("a key without limits is not limited and gets no rate-limit headers", async () => {
      const { secret } = await gw.createKey();
      const responses = await burst(secret, 30);
      expect(statuses(responses)).toEqual({ 200: 30 });
      expect(responses[0]!.headers.get("ratelimit-policy")).toBeNull();
    });

    it("changed limits apply from the key's next request", async () => {
      const { record, secret } = await gw.createKey({ limits: { minute: 2 } });
      expect(statuses(await burst(secret, 4))).toEqual({ 200: 2, 429: 2 });
      const admin = await gw.createKey({ org: record.org, permissions: ["admin:api-keys"] });
      const patch = await gw.call(`/api/v1/admin/api-keys/${record.id}`, {
        method: "PATCH",
        bearer: admin.secret,
        json: { limits: { minute: 5 } },
      });
      expect(patch.status).toBe(200);
      expect(statuses(await burst(secret, 5))).toEqual({ 200: 3, 429: 2 });
      await gw.call(`/api/v1/admin/api-keys/${record.id}`, {
        method: "PATCH",
        bearer: admin.secret,
        json: { limits: { minute: null } },
      });
      expect(statuses(await burst(secret, 5))).toEqual({ 200: 5 });
    });

    it("a refused request does nothing downstream: a 429'd key creation creates no key", async () => {
      const org = freshOrg();
      const admin = await gw.createKey({ org, permissions: ["admin:api-keys"], limits: { minute: 1 } });
      const create = () =>
        gw.call("/api/v1/admin/api-keys", { method: "POST", bearer: admin.secret, json: { owner: "svc" } });
      expect((await create()).status).toBe(201);
      expect((await create()).status).toBe(429);
      expect(await gw.store.listByOrg(org)).toHaveLength(2); // the admin key and the one admitted creation
    });
  });

  describe("default limits", () => {
    const withDefaults = useGateway({ ...exact, DEFAULT_LIMITS: "second=50,minute=3" }, undefined, topology);

    it("apply to keys without limits, and a key's own limits replace them", async () => {
      const plain = await withDefaults.createKey();
      const res = await Promise.all(
        Array.from({ length: 5 }, () => withDefaults.call(WHOAMI, { bearer: plain.secret })),
      );
      expect(statuses(res)).toEqual({ 200: 3, 429: 2 });
      expect(res[0]!.headers.get("ratelimit-policy")).toBe('"second";q=50;w=1, "minute";q=3;w=60');
      const own = await withDefaults.createKey({ limits: { minute: 4 } });
      const ownRes = await Promise.all(
        Array.from({ length: 5 }, () => withDefaults.call(WHOAMI, { bearer: own.secret })),
      );
      expect(statuses(ownRes)).toEqual({ 200: 4, 429: 1 });
    });

    it("are the windows a key's usage shows for a key without its own, as they are counted", async () => {
      const plain = await withDefaults.createKey();
      const own = await withDefaults.createKey({ org: plain.record.org, limits: { hour: 4 } });
      const admin = await withDefaults.createKey({
        org: plain.record.org,
        permissions: ["admin:api-keys"],
        limits: { day: 100 },
      });
      const windowsOf = async (id: string) => {
        const res = await withDefaults.call(`/api/v1/admin/api-keys/${id}/usage`, { bearer: admin.secret });
        expect(res.status).toBe(200);
        const { windows } = (await res.json()) as {
          windows: { scope: string; unit: string; window: string; limit: number }[];
        };
        return windows.map((w) => [w.scope, w.unit, w.window, w.limit]);
      };
      expect(await windowsOf(plain.record.id)).toEqual([
        ["key", "requests", "second", 50],
        ["key", "requests", "minute", 3],
      ]);
      expect(await windowsOf(own.record.id)).toEqual([["key", "requests", "hour", 4]]);
    });
  });
});
