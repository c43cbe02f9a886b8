import { RedisConsistencyTokens, ResourceAuthorization, SpiceDBClient } from "@gw/core/authz";
import type { Principal } from "@gw/core/principal";
import { createRedis } from "@gw/core/redis";
import {
  type RunningNodeProcess,
  redisStartedEarly,
  spicedbEnv,
  startGatewayProcess,
  startTestSpiceDB,
  type TestRedisStore,
} from "@gw/test-kit";
import { pastRecentWindow } from "@gw/test-kit/zedtokens";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { ApiKeyStore } from "../src/api-keys/store.ts";
import { FORBIDDEN_BODY } from "./authorization-helpers.ts";
import { freshOrg, useGateway } from "./harness.ts";

describe.each([
  ["fully consistent right after a write (the default)", "6000", "single"],
  ["at least as fresh as the last write's ZedToken", "0", "single"],
  // On a Redis Cluster, the mode whose every check reads the resource's ZedToken from Redis.
  ["at least as fresh as the last write's ZedToken", "0", "cluster"],
] as const)(
  "read-after-write across gateway replicas: %s (SPICEDB_FULLY_CONSISTENT_AFTER_WRITE_MS=%s), on %s Redis",
  (_name, recentWriteMs, topology) => {
    let redisServer: TestRedisStore;
    let spicedb: Awaited<ReturnType<typeof startTestSpiceDB>>;
    let replicas: RunningNodeProcess[] = [];
    let redis: ReturnType<typeof createRedis>;
    let authorization: ResourceAuthorization;
    let spicedbClient: SpiceDBClient;

    const redisStarted = redisStartedEarly(topology);
    beforeAll(async () => {
      [redisServer, spicedb] = await Promise.all([redisStarted(), startTestSpiceDB()]);
      const env = {
        REDIS_URL: redisServer.url,
        SPICEDB_FULLY_CONSISTENT_AFTER_WRITE_MS: recentWriteMs,
        ...spicedbEnv(spicedb),
      };
      replicas = await Promise.all([startGatewayProcess(env), startGatewayProcess(env)]);
      redis = createRedis(redisServer.url, { connectionName: "test" });
      spicedbClient = new SpiceDBClient({
        endpoint: spicedb.endpoint,
        presharedKey: spicedb.presharedKey,
        insecure: true,
        deadlineMs: 2_000,
      });
      authorization = new ResourceAuthorization(
        spicedbClient,
        new RedisConsistencyTokens(redis, Number(recentWriteMs)),
      );
    });

    afterAll(async () => {
      await Promise.all(replicas.map((r) => r.stop()));
      spicedbClient?.close();
      redis?.disconnect();
      await Promise.all([redisServer?.stop(), spicedb?.close()]);
    });

    /** A fresh organization, a key of it, and alice acting through that key. */
    const aliceWithKey = async () => {
      const org = freshOrg();
      const { record, secret } = await new ApiKeyStore(redis).create({ org, owner: "backend" });
      const alice: Principal = {
        org,
        user: "alice",
        keyId: record.id,
        permissions: [],
        credential: "api_key",
        onBehalfOf: true,
      };
      return { org, secret, alice };
    };

    it("a check on replica B right after a grant or revoke on replica A sees it, every time", async () => {
      const [a, b] = replicas as [RunningNodeProcess, RunningNodeProcess];
      const { org, secret, alice: principal } = await aliceWithKey();
      const call = (replica: RunningNodeProcess, path: string, user: string, body?: unknown) =>
        fetch(`${replica.url}/api/v1/authorization/llm/${path}`, {
          method: body ? "POST" : "GET",
          headers: {
            authorization: `Bearer ${secret}`,
            "x-on-behalf-of": user,
            "content-type": "application/json",
          },
          body: body ? JSON.stringify(body) : undefined,
        });
      for (let round = 0; round < 15; round++) {
        const id = `conv_round${round}`;
        await authorization.createOwnership(principal, { type: "conversation", id });
        const change = { resourceType: "conversation", resourceId: id, userId: "bob", role: "writer" };
        expect((await call(a, "grant", "alice", change)).status).toBe(204);
        const afterGrant = await call(
          b,
          `check?resourceType=conversation&resourceId=${id}&role=writer`,
          "bob",
        );
        expect(await afterGrant.json()).toEqual({ allowed: true });
        expect((await call(b, "revoke", "alice", change)).status).toBe(204);
        const afterRevoke = await call(
          a,
          `check?resourceType=conversation&resourceId=${id}&role=reader`,
          "bob",
        );
        expect(await afterRevoke.json()).toEqual({ allowed: false });
      }
      // The token of the last write is what made that possible; it is in Redis for every replica.
      expect(await redis.get(`gw:zedtoken:{conversation:${org}/conv_round14}`)).toBeTruthy();
    });

    it("a decision replica B keeps is dropped by a revoke on replica A: B's very next check is denied", async () => {
      const [a, b] = replicas as [RunningNodeProcess, RunningNodeProcess];
      const { org, secret, alice } = await aliceWithKey();
      const id = "conv_kept";
      const check = async (replica: RunningNodeProcess) => {
        const res = await fetch(
          `${replica.url}/api/v1/authorization/llm/check?resourceType=conversation&resourceId=${id}&role=reader`,
          { headers: { authorization: `Bearer ${secret}`, "x-on-behalf-of": "bob" } },
        );
        return ((await res.json()) as { allowed: boolean }).allowed;
      };
      const hits = async (replica: RunningNodeProcess) => {
        const text = await (await fetch(`${replica.url}/metrics`)).text();
        return Number(/^gateway_decision_cache_lookups_total\{outcome="hit"\} (\d+)/m.exec(text)?.[1]);
      };
      await authorization.createOwnership(alice, { type: "conversation", id });
      await authorization.grant(alice, { type: "conversation", id, userId: "bob", role: "reader" });
      // The "recent" window, when there is one, has passed: checks may be answered from the cache.
      await pastRecentWindow(redis, `gw:zedtoken:{conversation:${org}/${id}}`);

      expect(await check(b)).toBe(true);
      // A gateway keeps decisions once it has had Redis for the window (it cannot know what Redis lost
      // before it connected), which for a replica just started may still be running.
      await vi.waitFor(
        async () => {
          const before = await hits(b);
          expect(await check(b)).toBe(true);
          expect(await hits(b), "the second check on B came from its cache").toBe(before + 1);
        },
        { timeout: 15_000, interval: 250 },
      );

      const revoked = await fetch(`${a.url}/api/v1/authorization/llm/revoke`, {
        method: "POST",
        headers: {
          authorization: `Bearer ${secret}`,
          "x-on-behalf-of": "alice",
          "content-type": "application/json",
        },
        body: JSON.stringify({ resourceType: "conversation", resourceId: id, userId: "bob", role: "reader" }),
      });
      expect(revoked.status).toBe(204);
      expect(await check(b)).toBe(false);
    });

    it("a key created on replica A protects its owner on replica B at once: no other key acts as them", async () => {
      const [a, b] = replicas as [RunningNodeProcess, RunningNodeProcess];
      const org = freshOrg();
      const store = new ApiKeyStore(redis);
      const admin = await store.create({ org, owner: "root", permissions: ["admin:api-keys"] });
      const bob = await store.create({ org, owner: "bob" });
      const asCarol = () =>
        fetch(`${b.url}/api/v1/authentication/whoami`, {
          headers: { authorization: `Bearer ${bob.secret}`, "x-on-behalf-of": "carol" },
        });
      // B has just let bob's key act for carol, who owns no key yet.
      expect((await asCarol()).status).toBe(200);
      const created = await fetch(`${a.url}/api/v1/admin/api-keys`, {
        method: "POST",
        headers: { authorization: `Bearer ${admin.secret}`, "content-type": "application/json" },
        body: JSON.stringify({ owner: "carol" }),
      });
      expect(created.status).toBe(201);
      const refused = await asCarol();
      expect(refused.status).toBe(403);
      expect((await refused.json()).message).toBe(
        "X-On-Behalf-Of 'carol' owns an API key of this organization, and this API key's X-On-Behalf-Of policy does not name them in users",
      );
    });
  },
);

describe("fail closed when SpiceDB is unreachable", () => {
  const gw = useGateway({ SPICEDB_DEADLINE_MS: "500" });

  it("answers 503, never allowed: true and never a 204 that did not persist", async () => {
    const { secret } = await gw.createKey({ owner: "alice" });
    const check = (id: string) =>
      gw.call(`/api/v1/authorization/llm/check?resourceType=conversation&resourceId=${id}&role=reader`, {
        bearer: secret,
      });
    const change = (path: string, id: string) =>
      gw.call(`/api/v1/authorization/llm/${path}`, {
        method: "POST",
        bearer: secret,
        json: { resourceType: "conversation", resourceId: id, userId: "bob", role: "reader" },
      });
    expect((await check("conv_1")).status).toBe(200);
    expect(await (await change("grant", "conv_1")).json()).toEqual(FORBIDDEN_BODY);

    await gw.spicedb.close();

    // What SpiceDB was not asked about lately: 503.
    for (const res of [
      await check("conv_2"),
      await change("grant", "conv_2"),
      await change("revoke", "conv_3"),
    ]) {
      expect(res.status).toBe(503);
      expect(await res.json()).toEqual({
        error: "Service Unavailable",
        message: expect.stringMatching(/authorization/i),
        code: "spicedb_unavailable",
      });
    }
    // A decision SpiceDB gave a moment ago may still be served from the decision cache, as it was given.
    const kept = await check("conv_1");
    expect(kept.status === 503 || (await kept.json()).allowed === false).toBe(true);
    const ready = await gw.call("/readyz");
    expect(ready.status).toBe(503);
    expect((await ready.json()).checks).toEqual({ redis: "ok", spicedb: "unreachable" });
    // Authentication does not depend on SpiceDB.
    expect((await gw.call("/api/v1/authentication/whoami", { bearer: secret })).status).toBe(200);
  });
});
