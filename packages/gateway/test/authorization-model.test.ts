import { PERMISSION_FOR_ROLE, SpiceDBClient, scopedId, subjectContext, v1 } from "@gw/core";
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { newOrg, RANK } from "./authorization-helpers.ts";
import { freshOrg, useGateway } from "./harness.ts";

const gw = useGateway();

/** SpiceDB asked directly, as `zed` or another service would, with or without the caveat context. */
let raw: SpiceDBClient;
beforeAll(() => {
  raw = new SpiceDBClient({
    endpoint: gw.spicedb.endpoint,
    presharedKey: gw.spicedb.presharedKey,
    insecure: true,
    deadlineMs: 5_000,
  });
});
afterAll(() => raw?.close());

const FULLY = v1.Consistency.create({ requirement: { oneofKind: "fullyConsistent", fullyConsistent: true } });
const user = (org: string, id: string) =>
  v1.SubjectReference.create({
    object: v1.ObjectReference.create({ objectType: "user", objectId: scopedId(org, id) }),
  });

async function rawCheck(org: string, id: string, subject: v1.SubjectReference, role: Role, context?: string) {
  const response = await raw.checkPermission(
    v1.CheckPermissionRequest.create({
      consistency: FULLY,
      resource: v1.ObjectReference.create({ objectType: "conversation", objectId: scopedId(org, id) }),
      permission: PERMISSION_FOR_ROLE[role],
      subject,
      ...(context ? { context: subjectContext(context) } : {}),
    }),
  );
  return response.permissionship;
}

/** The conversations `subject` may hold `role` on, as LookupResources answers, with how it holds each. */
async function rawLookup(subject: v1.SubjectReference, role: Role, context?: string) {
  const found = await raw.lookupResources(
    v1.LookupResourcesRequest.create({
      consistency: FULLY,
      resourceObjectType: "conversation",
      permission: PERMISSION_FOR_ROLE[role],
      subject,
      ...(context ? { context: subjectContext(context) } : {}),
    }),
  );
  return new Map(found.map((r) => [r.resourceObjectId, r.permissionship]));
}

type Role = "owner" | "writer" | "reader";
const USERS = ["alice", "bob", "carol"] as const;
const ROLES: Role[] = ["owner", "writer", "reader"];

/** The reference: who holds which role, and what every operation should answer. */
class Model {
  roles = new Map<string, Role>([["alice", "owner"]]);

  owners() {
    return [...this.roles].filter(([user, role]) => user !== "*" && role === "owner").map(([user]) => user);
  }

  /** Expected status of a grant or revoke, applying it when it succeeds. */
  apply(op: "grant" | "revoke", actor: string, userId: string, role: Role): number {
    if (!this.owners().includes(actor)) return 403;
    const losesOwner =
      userId !== "*" &&
      this.roles.get(userId) === "owner" &&
      (op === "revoke" ? role === "owner" : role !== "owner");
    if (losesOwner && this.owners().length === 1) return 409;
    if (op === "grant") this.roles.set(userId, role);
    else if (this.roles.get(userId) === role) this.roles.delete(userId);
    return 204;
  }

  allowed(user: string, role: Role): boolean {
    const own = RANK[this.roles.get(user) ?? "none"];
    const everyone = RANK[this.roles.get("*") ?? "none"];
    return Math.max(own, everyone) >= RANK[role];
  }
}

const command = fc.record({
  op: fc.constantFrom("grant" as const, "revoke" as const),
  actor: fc.constantFrom(...USERS),
  userId: fc.constantFrom(...USERS, "*"),
  role: fc.constantFrom(...ROLES),
});

describe("grant and revoke against a reference model", () => {
  it("every check after every random grant/revoke agrees with the model; no other organization ever gets in", async () => {
    const o = await newOrg(gw);
    // Another organization, whose users share names with this one's.
    const other = freshOrg();
    await fc.assert(
      fc.asyncProperty(fc.array(command, { minLength: 1, maxLength: 10 }), async (commands) => {
        const id = await o.create("alice");
        const model = new Model();
        for (const c of commands) {
          const body = { resourceType: "conversation", resourceId: id, userId: c.userId, role: c.role };
          if (c.userId === "*" && c.role === "owner") {
            expect((await o[c.op](c.actor, body)).status).toBe(422);
            continue;
          }
          const expected = model.apply(c.op, c.actor, c.userId, c.role);
          const res = await o[c.op](c.actor, body);
          expect(res.status, `${c.op} ${JSON.stringify(c)}`).toBe(expected);
          const checks = await Promise.all(
            [...USERS, "dave"].flatMap((user) =>
              ROLES.map(async (role) => ({
                user,
                role,
                allowed: await o.check(user, "conversation", id, role),
              })),
            ),
          );
          for (const { user, role, allowed } of checks) {
            expect(allowed, `${user} ${role} after ${JSON.stringify(c)}`).toBe(model.allowed(user, role));
          }

          // Straight to SpiceDB: whatever the wildcard holds, a user of another organization is never
          // granted, with or without the caveat context, by check or by lookup.
          const { HAS_PERMISSION, NO_PERMISSION } = v1.CheckPermissionResponse_Permissionship;
          const { HAS_PERMISSION: LOOKUP_HAS } = v1.LookupPermissionship;
          await Promise.all(
            [user(other, "alice"), user(other, "dave")].map(async (stranger) => {
              for (const role of ROLES) {
                expect(await rawCheck(o.org, id, stranger, role, other), `${role} with context`).toBe(
                  NO_PERMISSION,
                );
                expect(await rawCheck(o.org, id, stranger, role), `${role} without context`).not.toBe(
                  HAS_PERMISSION,
                );
              }
              expect((await rawLookup(stranger, "reader", other)).has(scopedId(o.org, id))).toBe(false);
              expect((await rawLookup(stranger, "reader")).get(scopedId(o.org, id))).not.toBe(LOOKUP_HAS);
            }),
          );
          // And this organization's users find exactly what the model says they may read.
          const listings = await Promise.all(
            [...USERS, "dave"].map(async (name) => ({
              name,
              listed: (await rawLookup(user(o.org, name), "reader", o.org)).has(scopedId(o.org, id)),
            })),
          );
          for (const { name, listed } of listings) {
            expect(listed, `${name} lists it after ${JSON.stringify(c)}`).toBe(model.allowed(name, "reader"));
          }
        }
      }),
      { numRuns: 30 },
    );
  }, 120_000);
});
