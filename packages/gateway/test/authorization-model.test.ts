import { randomBytes } from "node:crypto";
import {
  administratorContext,
  PERMISSION_FOR_ROLE,
  RedisConsistencyTokens,
  ResourceAuthorization,
  SpiceDBClient,
  scopedId,
  subjectContext,
  v1,
} from "@gw/core/authz";
import { McpToolAuthorization } from "@gw/core/mcp";
import type { Principal } from "@gw/core/principal";
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { newOrg, type Org, RANK } from "./authorization-helpers.ts";
import { freshOrg, type GatewayHarness, useGateway } from "./harness.ts";

/** A type other backends register and delete through the API (the service's own types refuse both). */
const TYPE = "file";

/** SpiceDB asked directly, as `zed` or another service would, with or without the caveat context. */
let raw: SpiceDBClient;

const FULLY = v1.Consistency.create({ requirement: { oneofKind: "fullyConsistent", fullyConsistent: true } });
const user = (org: string, id: string) =>
  v1.SubjectReference.create({
    object: v1.ObjectReference.create({ objectType: "user", objectId: scopedId(org, id) }),
  });

async function rawCheck(org: string, id: string, subject: v1.SubjectReference, role: Role, context?: string) {
  const response = await raw.checkPermission(
    v1.CheckPermissionRequest.create({
      consistency: FULLY,
      resource: v1.ObjectReference.create({ objectType: TYPE, objectId: scopedId(org, id) }),
      permission: PERMISSION_FOR_ROLE[role],
      subject,
      ...(context ? { context: subjectContext(context) } : {}),
    }),
  );
  return response.permissionship;
}

/** `inspect` as an administrator of `subjectOrg`, as the gateway asks it for a key with admin:console. */
async function rawInspect(org: string, id: string, subject: v1.SubjectReference, subjectOrg: string) {
  const response = await raw.checkPermission(
    v1.CheckPermissionRequest.create({
      consistency: FULLY,
      resource: v1.ObjectReference.create({ objectType: TYPE, objectId: scopedId(org, id) }),
      permission: "inspect",
      subject,
      context: administratorContext(subjectOrg, true),
    }),
  );
  return response.permissionship;
}

/** The resources of TYPE `subject` may hold `role` on, as LookupResources answers, with how it holds each. */
async function rawLookup(subject: v1.SubjectReference, role: Role, context?: string) {
  const found = await raw.lookupResources(
    v1.LookupResourcesRequest.create({
      consistency: FULLY,
      resourceObjectType: TYPE,
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

/** How close to an expiry a check may land on either side: such checks are not judged. */
const EXPIRY_MARGIN_MS = 250;

/** The reference: who holds which role (until when), and what every operation should answer. */
class Model {
  roles = new Map<string, { role: Role; expiresAt?: number }>([["alice", { role: "owner" }]]);

  owners() {
    return [...this.roles]
      .filter(([user, held]) => user !== "*" && held.role === "owner")
      .map(([user]) => user);
  }

  /** Expected status of an operation, applying it when it succeeds. */
  apply(c: Command, expiresAt: number | undefined): number {
    if (c.op === "register") {
      if (this.owners().length > 0) return 409;
      this.roles = new Map([[c.actor, { role: "owner" }]]);
      return 201;
    }
    if (!this.owners().includes(c.actor)) return 403;
    if (c.op === "delete") {
      this.roles.clear();
      return 204;
    }
    const losesOwner =
      c.userId !== "*" &&
      this.roles.get(c.userId)?.role === "owner" &&
      (c.op === "revoke" ? c.role === "owner" : c.role !== "owner");
    if (losesOwner && this.owners().length === 1) return 409;
    if (c.op === "grant") this.roles.set(c.userId, { role: c.role, ...(expiresAt ? { expiresAt } : {}) });
    else if (this.roles.get(c.userId)?.role === c.role) this.roles.delete(c.userId);
    return 204;
  }

  /** The role `user` holds at `at`, or "none". */
  held(user: string, at: number): Role | "none" {
    const held = this.roles.get(user);
    return held && (held.expiresAt === undefined || held.expiresAt > at) ? held.role : "none";
  }

  /** Whether `user` may act as `role`, or undefined when an expiry falls within the span of the check. */
  allowed(user: string, role: Role, from: number, to: number): boolean | undefined {
    const at = (t: number) => Math.max(RANK[this.held(user, t)], RANK[this.held("*", t)]) >= RANK[role];
    const before = at(from - EXPIRY_MARGIN_MS);
    return before === at(to + EXPIRY_MARGIN_MS) ? before : undefined;
  }

  /** The grants list as the API should show it; users whose expiry is too close to call are left out. */
  grants(from: number, to: number) {
    const uncertain = new Set(
      [...this.roles]
        .filter(
          ([, h]) =>
            h.expiresAt && h.expiresAt > from - EXPIRY_MARGIN_MS && h.expiresAt < to + EXPIRY_MARGIN_MS,
        )
        .map(([user]) => user),
    );
    const expected = [...this.roles]
      .filter(([user, h]) => !uncertain.has(user) && (h.expiresAt === undefined || h.expiresAt > to))
      .map(([userId, h]) => ({ userId, role: h.role, expiresAt: h.expiresAt }));
    return { expected, uncertain };
  }
}

type Command = {
  op: "grant" | "revoke" | "register" | "delete";
  actor: string;
  userId: string;
  role: Role;
  /** For grants: none, or this many milliseconds from now. */
  expiresInMs: number | undefined;
};

const command: fc.Arbitrary<Command> = fc.record({
  op: fc.constantFrom(
    "grant" as const,
    "grant" as const,
    "revoke" as const,
    "register" as const,
    "delete" as const,
  ),
  actor: fc.constantFrom(...USERS),
  userId: fc.constantFrom(...USERS, "*"),
  role: fc.constantFrom(...ROLES),
  expiresInMs: fc.constantFrom(undefined, undefined, 400, 1_500, 3_600_000),
});

/** One command through the API. */
function send(o: Org, id: string, c: Command, expiresAt: number | undefined): Promise<Response> {
  if (c.op === "register") return o.register(c.actor, TYPE, id);
  if (c.op === "delete") return o.deleteResource(c.actor, TYPE, id);
  const body = { resourceType: TYPE, resourceId: id, userId: c.userId, role: c.role };
  return o[c.op](c.actor, expiresAt ? { ...body, expiresAt: new Date(expiresAt).toISOString() } : body);
}

/** Checks the gateway's decision cache answered, from its metrics. */
async function cacheLookups(gw: GatewayHarness, outcome: string): Promise<number> {
  const text = await (await fetch(gw.metricsUrl)).text();
  const match = new RegExp(
    `^gateway_decision_cache_lookups_total\\{outcome="${outcome}"\\} (\\d+)`,
    "m",
  ).exec(text);
  return Number(match?.[1]);
}

/**
 * Sequences of commands per configuration. The default configuration is the one deployed and gets the
 * most; the other two change only where a check's answer comes from (the cache right after a write, or
 * never), which ten sequences of up to ten commands each reach at every step.
 */
const RUNS_DEFAULT = 20;
const RUNS_OTHER = 10;

describe.each([
  ["the decision cache on (the default)", {}, RUNS_DEFAULT],
  [
    "the decision cache on, also right after writes",
    { SPICEDB_FULLY_CONSISTENT_AFTER_WRITE_MS: "0" },
    RUNS_OTHER,
  ],
  ["the decision cache off", { DECISION_CACHE_SIZE: "0" }, RUNS_OTHER],
] as const)("the authorization model against a reference, %s", (name, env, numRuns) => {
  const gw = useGateway(env);
  beforeAll(() => {
    raw = new SpiceDBClient({
      endpoint: gw.spicedb.endpoint,
      presharedKey: gw.spicedb.presharedKey,
      insecure: true,
      deadlineMs: 5_000,
    });
  });
  afterAll(() => raw?.close());

  it("every check, grants list and lookup after random register/delete/grant (expiring or not)/revoke agrees with the model; no other organization ever gets in", async () => {
    const o = await newOrg(gw);
    // Another organization, whose users share names with this one's.
    const other = freshOrg();
    // An administrator of each (admin:console), owning nothing. The server key acts for every user,
    // dave too, who owns a key: its policy names them all.
    await gw.store.update(o.keyId, { onBehalfOf: { users: [...USERS, "dave"] } });
    const administrator = (await gw.createKey({ org: o.org, owner: "dave", permissions: ["admin:console"] }))
      .secret;
    const strangerAdministrator = (
      await gw.createKey({ org: other, owner: "alice", permissions: ["admin:console"] })
    ).secret;
    await fc.assert(
      fc.asyncProperty(fc.array(command, { minLength: 1, maxLength: 10 }), async (commands) => {
        const id = await o.create("alice", TYPE);
        const model = new Model();
        for (const c of commands) {
          const expiresAt = c.op === "grant" && c.expiresInMs ? Date.now() + c.expiresInMs : undefined;
          const res = await send(o, id, c, expiresAt);
          if ((c.op === "grant" || c.op === "revoke") && c.userId === "*" && c.role === "owner") {
            expect(res.status).toBe(422);
            continue;
          }
          if (expiresAt && c.role === "owner") {
            expect(res.status, "an owner never expires").toBe(422);
            continue;
          }
          if (expiresAt && res.status === 422 && Date.now() >= expiresAt) {
            // A loaded machine can take longer than a short expiry to get the grant to the gateway,
            // which then refuses a time in the past, and changes nothing. Only once it has passed.
            expect(JSON.stringify(await res.json())).toContain("Input should be in the future");
            continue;
          }
          expect(res.status, `${c.op} ${JSON.stringify(c)}`).toBe(model.apply(c, expiresAt));

          const from = Date.now();
          const checks = await Promise.all(
            [...USERS, "dave"].flatMap((user) =>
              ROLES.map(async (role) => ({
                user,
                role,
                allowed: await o.check(user, TYPE, id, role),
              })),
            ),
          );
          const to = Date.now();
          for (const { user, role, allowed } of checks) {
            const expected = model.allowed(user, role, from, to);
            if (expected !== undefined) {
              expect(allowed, `${user} ${role} after ${JSON.stringify(c)}`).toBe(expected);
            }
          }

          // Who has access, as an owner sees it, expiries included; and as an administrator of the
          // organization sees it (`inspect`), who owns nothing, while the resource exists.
          const sameGrants = async (asked: () => Promise<Response>, who: string) => {
            const from = Date.now();
            const listed = (await (await asked()).json()).data as {
              userId: string;
              role: Role;
              expiresAt?: string;
            }[];
            const { expected, uncertain } = model.grants(from, Date.now());
            const certain = listed.filter((g) => !uncertain.has(g.userId));
            expect(
              certain.map((g) => [g.userId, g.role]).sort(),
              `grants as ${who} after ${JSON.stringify(c)}`,
            ).toEqual(expected.map((g) => [g.userId, g.role]).sort());
            for (const g of certain) {
              const at = expected.find((e) => e.userId === g.userId)?.expiresAt;
              if (at === undefined) expect(g.expiresAt).toBeUndefined();
              else expect(Math.abs(Date.parse(g.expiresAt!) - at)).toBeLessThan(1_000);
            }
          };
          const inspect = (secret: string) =>
            gw.call(`/api/v1/admin/authorization/resources/${TYPE}/${id}/grants`, { bearer: secret });
          const owner = model.owners()[0];
          if (owner) {
            await sameGrants(() => o.grants(owner, TYPE, id), "its owner");
            await sameGrants(() => inspect(administrator), "an administrator");
          } else {
            expect((await inspect(administrator)).status, "a deleted resource").toBe(403);
          }
          expect((await inspect(strangerAdministrator)).status, "another organization's administrator").toBe(
            403,
          );

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
              expect(await rawInspect(o.org, id, stranger, other), "inspect as its administrator").toBe(
                NO_PERMISSION,
              );
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
          const listedBy = Date.now();
          for (const { name, listed } of listings) {
            const expected = model.allowed(name, "reader", from, listedBy);
            if (expected !== undefined)
              expect(listed, `${name} lists it after ${JSON.stringify(c)}`).toBe(expected);
          }
        }
      }),
      { numRuns },
    );
    // The cache was consulted where it is on, and answered right after writes in the second run
    // (by default, checks within SPICEDB_FULLY_CONSISTENT_AFTER_WRITE_MS of a write pass it by).
    let lookups = 0;
    for (const outcome of ["hit", "miss", "bypass"]) lookups += await cacheLookups(gw, outcome);
    if (name.includes("off")) expect(lookups).toBe(0);
    else expect(lookups).toBeGreaterThan(0);
    if (name.includes("right after writes")) expect(await cacheLookups(gw, "hit")).toBeGreaterThan(0);
  }, 120_000);
});

/**
 * The tools of one server against a reference: server roles by grant and
 * revoke, tool roles by policy and default (one tool, or several in one
 * listing's batch).
 */
type ToolCommand =
  | { op: "grant" | "revoke"; userId: string; role: Role }
  | { op: "policy"; tool: string; role: Role | null }
  | { op: "default"; tool: string; role: "reader" | "writer" }
  | { op: "defaults"; tools: string[]; role: "reader" | "writer" };

const TOOLS = ["search", "delete", "rotate"] as const;
const toolCommand: fc.Arbitrary<ToolCommand> = fc.oneof(
  fc.record({
    op: fc.constantFrom("grant" as const, "revoke" as const),
    userId: fc.constantFrom("bob", "carol", "*"),
    role: fc.constantFrom("writer" as const, "reader" as const, "owner" as const),
  }),
  fc.record({
    op: fc.constant("policy" as const),
    tool: fc.constantFrom(...TOOLS),
    role: fc.constantFrom("reader" as const, "writer" as const, "owner" as const, null),
  }),
  fc.record({
    op: fc.constant("default" as const),
    tool: fc.constantFrom(...TOOLS),
    role: fc.constantFrom("reader" as const, "writer" as const),
  }),
  fc.record({
    op: fc.constant("defaults" as const),
    tools: fc.uniqueArray(fc.constantFrom(...TOOLS), { minLength: 1 }),
    role: fc.constantFrom("reader" as const, "writer" as const),
  }),
);

describe("the MCP tool model against a reference", () => {
  const gw = useGateway();
  let spicedb: SpiceDBClient;
  let tools: McpToolAuthorization;
  beforeAll(() => {
    spicedb = new SpiceDBClient({
      endpoint: gw.spicedb.endpoint,
      presharedKey: gw.spicedb.presharedKey,
      insecure: true,
      deadlineMs: 5_000,
    });
    const tokens = new RedisConsistencyTokens(gw.redis, 1_000);
    tools = new McpToolAuthorization(spicedb, tokens, new ResourceAuthorization(spicedb, tokens));
  });
  afterAll(() => spicedb?.close());

  it("who may call which tool after random grants, revokes, policies and defaults agrees with the model; another organization never may", async () => {
    const o = await newOrg(gw);
    const other = freshOrg();
    const principal = (org: string, user: string): Principal => ({
      org,
      user,
      keyId: o.keyId,
      permissions: [],
      credential: "api_key",
      onBehalfOf: true,
    });
    await fc.assert(
      fc.asyncProperty(fc.array(toolCommand, { minLength: 1, maxLength: 8 }), async (commands) => {
        const id = await o.create("alice", "mcp_server", `mcp_${randomBytes(6).toString("hex")}`);
        const roles = new Map<string, Role>([["alice", "owner"]]);
        const toolRoles = new Map<string, Role | null>();
        for (const c of commands) {
          if (c.op === "grant" || c.op === "revoke") {
            const body = { resourceType: "mcp_server", resourceId: id, userId: c.userId, role: c.role };
            const res = await o[c.op]("alice", body);
            if (c.userId === "*" && c.role === "owner") {
              expect(res.status).toBe(422);
              continue;
            }
            expect(res.status).toBe(204);
            if (c.op === "grant") roles.set(c.userId, c.role);
            else if (roles.get(c.userId) === c.role) roles.delete(c.userId);
          } else if (c.op === "policy") {
            await tools.setRole(principal(o.org, "alice"), id, c.tool, c.role);
            toolRoles.set(c.tool, c.role);
          } else if (c.op === "default") {
            const written = await tools.setDefault(o.org, id, c.tool, c.role);
            expect(written).toBe(!toolRoles.has(c.tool));
            if (!toolRoles.has(c.tool)) toolRoles.set(c.tool, c.role);
          } else if (c.op === "defaults") {
            // Known tools are left as they are; the others are written, whichever of them were known.
            const written = await tools.setDefaults(
              o.org,
              id,
              c.tools.map((name) => ({ name, role: c.role })),
            );
            const unknown = c.tools.filter((t) => !toolRoles.has(t));
            expect([...written].sort()).toEqual([...unknown].sort());
            for (const t of unknown) toolRoles.set(t, c.role);
          }
          const rank = (user: string) =>
            Math.max(RANK[roles.get(user) ?? "none"], RANK[roles.get("*") ?? "none"]);
          for (const user of ["alice", "bob", "carol", "dave"]) {
            const callable = await tools.callable(principal(o.org, user), id, [...TOOLS]);
            const expected = TOOLS.filter((t) => {
              const needs = toolRoles.get(t);
              return needs !== undefined && needs !== null && rank(user) >= RANK[needs];
            });
            expect([...callable].sort(), `${user} after ${JSON.stringify(c)}`).toEqual(expected.sort());
            // Another organization's user of the same name, even claiming this organization's context.
            expect((await tools.callable(principal(other, user), id, [...TOOLS])).size).toBe(0);
          }
          expect(Object.fromEntries(await tools.roles(o.org, id))).toEqual(Object.fromEntries(toolRoles));
        }
      }),
      { numRuns: 15 },
    );
  }, 120_000);
});
