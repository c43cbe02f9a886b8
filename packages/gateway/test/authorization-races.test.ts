import type { BeforeWriteHook } from "@gw/core/authz";
import type { Principal } from "@gw/core/principal";
import { afterEach, describe, expect, it } from "vitest";
import { FORBIDDEN_BODY, newOrg } from "./authorization-helpers.ts";
import { useGateway } from "./harness.ts";

const gw = useGateway();

/**
 * Holds the first owner-only write of `user` after its ownership check and
 * before its write, until released: every other request passes straight
 * through. This is the window a check-then-write race lives in. At
 * `afterCheck`, it is held before the write reads anything more (the other
 * owners a demotion relies on).
 */
function holdWriteOf(user: string, seam: "afterCheck" | "beforeWrite" = "beforeWrite") {
  let arrived!: () => void;
  let release!: () => void;
  const reached = new Promise<void>((r) => (arrived = r));
  const gate = new Promise<void>((r) => (release = r));
  let held = false;
  const hook: BeforeWriteHook = async (_operation, principal: Principal) => {
    if (held || principal.user !== user) return;
    held = true;
    arrived();
    await gate;
  };
  gw.authorizationHooks[seam] = hook;
  return { reached, release };
}

afterEach(() => {
  gw.authorizationHooks.beforeWrite = undefined;
  gw.authorizationHooks.afterCheck = undefined;
});

describe("owner-only writes are guarded by the caller's ownership when they land", () => {
  it("a co-owner demoted while his own grant is in flight loses it: 403, and he stays demoted", async () => {
    const o = await newOrg(gw);
    const id = await o.create("alice");
    const body = { resourceType: "conversation", resourceId: id };
    expect((await o.grant("alice", { ...body, userId: "bob", role: "owner" })).status).toBe(204);

    const bob = holdWriteOf("bob");
    const bobKeepsOwner = o.grant("bob", { ...body, userId: "bob", role: "owner" });
    await bob.reached; // bob's check has passed: he is an owner at this point
    expect((await o.grant("alice", { ...body, userId: "bob", role: "reader" })).status).toBe(204);
    bob.release();

    const res = await bobKeepsOwner;
    expect(res.status).toBe(403);
    expect(await res.json()).toEqual(FORBIDDEN_BODY);
    expect(await o.check("bob", "conversation", id, "owner")).toBe(false);
    expect(await o.check("bob", "conversation", id, "writer")).toBe(false);
    expect(await o.check("bob", "conversation", id, "reader")).toBe(true);
    expect(await o.check("alice", "conversation", id, "owner")).toBe(true);
  });

  it("a revoke and a grant to others by a demoted owner do not land either", async () => {
    const o = await newOrg(gw);
    const id = await o.create("alice");
    const body = { resourceType: "conversation", resourceId: id };
    await o.grant("alice", { ...body, userId: "bob", role: "owner" });
    await o.grant("alice", { ...body, userId: "carol", role: "reader" });

    for (const [op, change] of [
      ["revoke", { userId: "carol", role: "reader" }],
      ["grant", { userId: "mallory", role: "writer" }],
    ] as const) {
      expect((await o.grant("alice", { ...body, userId: "bob", role: "owner" })).status).toBe(204);
      const bob = holdWriteOf("bob");
      const inFlight = o[op]("bob", { ...body, ...change });
      await bob.reached;
      expect((await o.revoke("alice", { ...body, userId: "bob", role: "owner" })).status).toBe(204);
      bob.release();
      const res = await inFlight;
      expect(res.status, op).toBe(403);
      expect(await res.json()).toEqual(FORBIDDEN_BODY);
    }
    expect(await o.check("carol", "conversation", id, "reader")).toBe(true);
    expect(await o.check("mallory", "conversation", id, "reader")).toBe(false);
  });

  it("two owners removing each other: the one who lands second is no longer an owner (403), one owner stays", async () => {
    const o = await newOrg(gw);
    const id = await o.create("alice");
    const body = { resourceType: "conversation", resourceId: id, role: "owner" };
    await o.grant("alice", { ...body, userId: "bob" });

    const alice = holdWriteOf("alice");
    const aliceRemovesBob = o.revoke("alice", { ...body, userId: "bob" });
    await alice.reached; // both are owners, and alice's check has passed
    expect((await o.revoke("bob", { ...body, userId: "alice" })).status).toBe(204);
    alice.release();

    expect((await aliceRemovesBob).status).toBe(403);
    expect(await o.check("alice", "conversation", id, "owner")).toBe(false);
    expect(await o.check("bob", "conversation", id, "owner")).toBe(true);
  });

  it.each([
    ["demote", { role: "reader" }, "grant"],
    ["revoke", { role: "owner" }, "revoke"],
  ] as const)(
    "two owners who %s each other at once: the second gets 403, even when the first landed before it read the other owners",
    async (_name, change, op) => {
      const o = await newOrg(gw);
      const id = await o.create("alice");
      const body = { resourceType: "conversation", resourceId: id };
      await o.grant("alice", { ...body, userId: "bob", role: "owner" });

      const alice = holdWriteOf("alice", "afterCheck");
      const aliceDemotesBob = o[op]("alice", { ...body, userId: "bob", ...change });
      await alice.reached; // alice's ownership check has passed; she has not looked for another owner yet
      expect((await o[op]("bob", { ...body, userId: "alice", ...change })).status).toBe(204);
      alice.release();

      const res = await aliceDemotesBob;
      expect(res.status).toBe(403);
      expect(await res.json()).toEqual(FORBIDDEN_BODY);
      expect(await o.check("bob", "conversation", id, "owner")).toBe(true);
      expect(await o.check("alice", "conversation", id, "owner")).toBe(false);
    },
  );

  it("an owner stepping down relies on another owner, who steps down first: 409, and the resource keeps an owner", async () => {
    const o = await newOrg(gw);
    const id = await o.create("alice");
    const body = { resourceType: "conversation", resourceId: id };
    await o.grant("alice", { ...body, userId: "bob", role: "owner" });

    const alice = holdWriteOf("alice");
    const aliceStepsDown = o.grant("alice", { ...body, userId: "alice", role: "reader" });
    await alice.reached; // alice found bob as the other owner
    expect((await o.grant("bob", { ...body, userId: "bob", role: "reader" })).status).toBe(204);
    alice.release();

    const res = await aliceStepsDown;
    expect(res.status).toBe(409);
    expect(await res.json()).toEqual({
      error: "Conflict",
      message: expect.stringMatching(/last owner/i),
      code: "last_owner",
    });
    expect(await o.check("alice", "conversation", id, "owner")).toBe(true);
    expect(await o.check("bob", "conversation", id, "owner")).toBe(false);
  });

  it("deleting a resource needs the caller to own it when the delete lands", async () => {
    const o = await newOrg(gw);
    const id = await o.create("alice");
    const body = { resourceType: "conversation", resourceId: id };
    await o.grant("alice", { ...body, userId: "bob", role: "owner" });
    const bobPrincipal: Principal = {
      org: o.org,
      user: "bob",
      keyId: o.keyId,
      permissions: [],
      credential: "api_key",
      onBehalfOf: true,
    };

    const bob = holdWriteOf("bob");
    const bobDeletes = gw.authorization.deleteResource(bobPrincipal, { type: "conversation", id });
    await bob.reached;
    expect((await o.revoke("alice", { ...body, userId: "bob", role: "owner" })).status).toBe(204);
    bob.release();

    await expect(bobDeletes).rejects.toMatchObject({ name: "NotResourceOwner" });
    expect(await o.check("alice", "conversation", id, "owner")).toBe(true);
  });
});
