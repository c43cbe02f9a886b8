import { randomBytes } from "node:crypto";
import {
  NotWriter,
  RedisConsistencyTokens,
  ResourceAuthorization,
  type Role,
  SpiceDBClient,
  WriterDeletion,
  type WriterDeletionHooks,
} from "@gw/core/authz";
import type { Principal } from "@gw/core/principal";
import { createRedis, type RedisClient } from "@gw/core/redis";
import { startTestRedis, startTestSpiceDB } from "@gw/test-kit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

let teardown: () => Promise<void>;
let authorization: ResourceAuthorization;
let deletion: WriterDeletion;
/** The seam injected into `deletion`, set by `between`. */
const hooks: WriterDeletionHooks = {};

beforeAll(async () => {
  const [redisServer, spicedb] = await Promise.all([startTestRedis(), startTestSpiceDB()]);
  const redis: RedisClient = createRedis(redisServer.url, { connectionName: "test" });
  const client = new SpiceDBClient({
    endpoint: spicedb.endpoint,
    presharedKey: spicedb.presharedKey,
    insecure: true,
    deadlineMs: 2_000,
  });
  const tokens = new RedisConsistencyTokens(redis, 6_000);
  authorization = new ResourceAuthorization(client, tokens);
  deletion = new WriterDeletion(client, tokens, undefined, hooks);
  teardown = async () => {
    client.close();
    redis.disconnect();
    await Promise.all([redisServer.stop(), spicedb.close()]);
  };
});
afterAll(() => teardown());

const as = (org: string, user: string): Principal => ({
  org,
  user,
  keyId: "key_1",
  permissions: [],
  credential: "api_key",
  onBehalfOf: true,
});

/** alice owns a new response of a new organization; each of `grants` is given its role. */
async function response(grants: [string, Role][] = []) {
  const org = `org-${randomBytes(4).toString("hex")}`;
  const resource = { type: "response" as const, id: `resp_${randomBytes(8).toString("hex")}` };
  const alice = as(org, "alice");
  await authorization.createOwnership(alice, resource);
  for (const [userId, role] of grants) await authorization.grant(alice, { ...resource, userId, role });
  const can = (user: string, role: Role) => authorization.check(as(org, user), resource, role);
  return { org, resource, alice, can };
}

/** Runs `meanwhile` after the delete has found its grant and before it lands. */
function between(meanwhile: () => Promise<unknown>) {
  hooks.beforeWrite = async () => {
    hooks.beforeWrite = undefined;
    await meanwhile();
  };
}

describe("deleting a resource as its writer", () => {
  it("an owner, a writer and a public writer may; every relationship goes", async () => {
    for (const deleter of ["alice", "bob", "zoe"]) {
      const { org, resource, can } = await response([
        ["bob", "writer"],
        ["*", "writer"],
        ["carol", "reader"],
      ]);
      await deletion.delete(as(org, deleter), resource);
      for (const user of ["alice", "bob", "carol", "zoe"]) expect(await can(user, "reader")).toBe(false);
    }
  });

  it("a reader may not, and nothing is deleted", async () => {
    const { org, resource, can } = await response([["carol", "reader"]]);
    await expect(deletion.delete(as(org, "carol"), resource)).rejects.toBeInstanceOf(NotWriter);
    expect(await can("alice", "owner")).toBe(true);
    expect(await can("carol", "reader")).toBe(true);
  });

  it("a writer demoted to reader while the delete is in flight gets NotWriter, and nothing is deleted", async () => {
    const { org, resource, alice, can } = await response([["bob", "writer"]]);
    between(() => authorization.grant(alice, { ...resource, userId: "bob", role: "reader" }));
    await expect(deletion.delete(as(org, "bob"), resource)).rejects.toBeInstanceOf(NotWriter);
    expect(await can("alice", "owner")).toBe(true);
    expect(await can("bob", "reader")).toBe(true);
  });

  it("a public writer revoked while the delete is in flight gets NotWriter, and nothing is deleted", async () => {
    const { org, resource, alice, can } = await response([["*", "writer"]]);
    between(() => authorization.revoke(alice, { ...resource, userId: "*", role: "writer" }));
    await expect(deletion.delete(as(org, "zoe"), resource)).rejects.toBeInstanceOf(NotWriter);
    expect(await can("alice", "owner")).toBe(true);
  });
});
