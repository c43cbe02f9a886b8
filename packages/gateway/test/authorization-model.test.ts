import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { newOrg, RANK } from "./authorization-helpers.ts";
import { useGateway } from "./harness.ts";

const gw = useGateway();

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
  it("every check after every random grant/revoke agrees with the model", async () => {
    const o = await newOrg(gw);
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
        }
      }),
      { numRuns: 30 },
    );
  }, 120_000);
});
