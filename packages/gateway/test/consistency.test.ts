import { RedisConsistencyTokens, ResourceAuthorization, SpiceDBClient, v1 } from "@gw/core/authz";
import type { Principal } from "@gw/core/principal";
import { createRedis } from "@gw/core/redis";
import { type RunningSpiceDBLocal, startSpiceDBLocal } from "@gw/spicedb-local";
import { REDIS_TOPOLOGIES, useTestRedis } from "@gw/test-kit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

/** What consistency each CheckPermission asked SpiceDB for, as the server received it. */
const asked: string[] = [];
let spicedb: RunningSpiceDBLocal;
let client: SpiceDBClient;

beforeAll(async () => {
  spicedb = await startSpiceDBLocal({
    host: "127.0.0.1",
    port: 0,
    presharedKey: "k",
    schemaFile: new URL("../../../spicedb/schema.zed", import.meta.url).pathname,
    observe: (path, request) => {
      if (!path.endsWith("/CheckPermission")) return;
      const requirement = v1.CheckPermissionRequest.fromBinary(request).consistency?.requirement;
      asked.push(
        requirement?.oneofKind === "atLeastAsFresh"
          ? `atLeastAsFresh:${requirement.atLeastAsFresh.token}`
          : `${requirement?.oneofKind}`,
      );
    },
  });
  client = new SpiceDBClient({
    endpoint: spicedb.endpoint,
    presharedKey: "k",
    insecure: true,
    deadlineMs: 2_000,
  });
});
afterAll(async () => {
  client.close();
  await spicedb.close();
});

const alice: Principal = {
  org: "acme",
  user: "alice",
  keyId: "k",
  permissions: [],
  credential: "api_key",
  onBehalfOf: false,
};

describe.each(REDIS_TOPOLOGIES)("the consistency a check asks for, on %s Redis", (topology) => {
  const store = useTestRedis(topology);

  it("is cheap for a resource never written, fully consistent right after a write, and the write's token after that", async () => {
    const { redis } = store;
    const tokens = new RedisConsistencyTokens(redis, 2_000);
    const authz = new ResourceAuthorization(client, tokens);
    const resource = { type: "conversation" as const, id: `conv_${Date.now()}` };

    await authz.check(alice, resource, "reader");
    expect(asked.at(-1)).toBe("minimizeLatency");

    await authz.createOwnership(alice, resource);
    const written = await tokens.get(`conversation:acme/${resource.id}`);
    expect(written).toEqual({ token: expect.any(String), recent: true });
    expect(await authz.check(alice, resource, "owner")).toBe(true);
    expect(asked.at(-1)).toBe("fullyConsistent");

    // "Recent" is a key Redis expires by itself, not a time any replica compares with its own clock.
    const marker = `gw:zedtoken:{conversation:acme/${resource.id}}:recent`;
    const ttl = await redis.pttl(marker);
    expect(ttl).toBeGreaterThan(0);
    expect(ttl).toBeLessThanOrEqual(2_000);
    await redis.del(marker);
    expect(await authz.check(alice, resource, "owner")).toBe(true);
    expect(asked.at(-1)).toBe(`atLeastAsFresh:${written!.token}`);
  });

  it("is fully consistent when the last write cannot be known (Redis trouble)", async () => {
    // A real client to a Redis that is not there: every command fails at once.
    const gone = createRedis("redis://127.0.0.1:1", {
      connectionName: "gone",
      extra: { lazyConnect: true, enableOfflineQueue: false, retryStrategy: () => null },
    });
    gone.on("error", () => undefined);
    const authz = new ResourceAuthorization(client, new RedisConsistencyTokens(gone, 0));
    await authz.check(alice, { type: "file", id: "file_x" }, "reader");
    expect(asked.at(-1)).toBe("fullyConsistent");
    gone.disconnect();
  });
});
