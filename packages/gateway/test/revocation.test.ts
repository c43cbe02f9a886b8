import { createRedis } from "@gw/core/redis";
import {
  describeEachTopology,
  type RunningNodeProcess,
  redisStartedEarly,
  startGatewayProcess,
  type TestRedisStore,
} from "@gw/test-kit";
import { afterAll, beforeAll, expect, it } from "vitest";
import { ApiKeyStore } from "../src/api-keys/store.ts";
import { freshOrg } from "./harness.ts";
import { oneSecondAfter } from "./propagation.ts";

describeEachTopology("revocation across gateway replicas on %s Redis", (topology) => {
  let redisServer: TestRedisStore;
  let replicas: RunningNodeProcess[] = [];
  let store: ApiKeyStore;
  let redis: ReturnType<typeof createRedis>;

  const redisStarted = redisStartedEarly(topology);
  beforeAll(async () => {
    redisServer = await redisStarted();
    // A long cache TTL, so only the change feed can make a replica notice the revocation in time.
    const env = { REDIS_URL: redisServer.url, API_KEY_CACHE_TTL_MS: "60000" };
    replicas = await Promise.all([startGatewayProcess(env), startGatewayProcess(env)]);
    redis = createRedis(redisServer.url, { connectionName: "test" });
    store = new ApiKeyStore(redis);
  });

  afterAll(async () => {
    redis?.disconnect();
    await Promise.all(replicas.map((r) => r.stop()));
    await redisServer?.stop();
  });

  const whoami = (replica: RunningNodeProcess, secret: string) =>
    fetch(`${replica.url}/api/v1/authentication/whoami`, { headers: { authorization: `Bearer ${secret}` } });

  it("a key revoked through one replica is refused by the other within one second", async () => {
    const [a, b] = replicas as [RunningNodeProcess, RunningNodeProcess];
    const org = freshOrg();
    const { secret: adminSecret } = await store.create({
      org,
      owner: "root",
      permissions: ["admin:api-keys"],
    });
    const { record, secret } = await store.create({ org, owner: "alice" });
    // Warm both replicas' caches with the active key.
    expect((await whoami(a, secret)).status).toBe(200);
    expect((await whoami(b, secret)).status).toBe(200);

    const revoke = await fetch(`${a.url}/api/v1/admin/api-keys/${record.id}`, {
      method: "DELETE",
      headers: { authorization: `Bearer ${adminSecret}` },
    });
    expect(revoke.status).toBe(200);
    const revokedAt = Date.now();
    // The replica that revoked refuses at once; the other within a second (by pub/sub: its cache TTL is 60 s).
    expect((await whoami(a, secret)).status).toBe(401);
    await oneSecondAfter(revokedAt);
    expect((await whoami(b, secret)).status).toBe(401);
  });

  it("an update (new permissions) is seen by the other replica too", async () => {
    const [a, b] = replicas as [RunningNodeProcess, RunningNodeProcess];
    const { record, secret } = await store.create({ org: freshOrg(), owner: "alice" });
    expect((await (await whoami(b, secret)).json()).permissions).toContain("usage:read");
    await store.update(record.id, { permissions: ["responses:read"] });
    const updatedAt = Date.now();
    await oneSecondAfter(updatedAt);
    for (const replica of [a, b]) {
      expect((await (await whoami(replica, secret)).json()).permissions).toEqual(["responses:read"]);
    }
  });
});
