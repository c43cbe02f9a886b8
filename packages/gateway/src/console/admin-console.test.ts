import { readFile } from "node:fs/promises";
import { AUDIT_ACTIONS } from "@gw/core/audit";
import { ManualClock } from "@gw/core/clock";
import { scanKeys, useTestRedis } from "@gw/test-kit";
import { describe, expect, it } from "vitest";
import { newOrg } from "../../test/authorization-helpers.ts";
import { consoleSessionCookie, consoleSignIn, freshOrg, useGateway } from "../../test/harness.ts";
import { hasMcpRoutes } from "./console-router.ts";
import { ConsoleSessions } from "./sessions.ts";

const ORIGIN = (url: string) => new URL(url).origin;
const ROOT = [
  "authorization:read",
  "authorization:write",
  "usage:read",
  "admin:api-keys",
  "admin:console",
] as const;

describe("console sessions", () => {
  const store = useTestRedis();
  const clock = new ManualClock(0, 1_000_000);
  const sessions = () =>
    new ConsoleSessions(store.redis, { idleMs: 30 * 60_000, maxAgeMs: 12 * 3_600_000, clock });

  it("ends after the idle time unused, and after the absolute time however busy", async () => {
    const s = sessions();
    const { id } = await s.create({ keyId: "key_idle", org: "acme", user: "alice" });
    clock.advance(29 * 60_000);
    expect(await s.touch(id)).toMatchObject({ keyId: "key_idle" });
    clock.advance(29 * 60_000); // 58 minutes in, but used 29 minutes ago
    expect(await s.touch(id)).toBeDefined();
    clock.advance(31 * 60_000);
    expect(await s.touch(id)).toBeUndefined();

    const busy = await s.create({ keyId: "key_busy", org: "acme", user: "alice" });
    for (let hour = 0; hour < 12; hour++) {
      expect(await s.touch(busy.id)).toBeDefined();
      clock.advance(20 * 60_000);
      expect(await s.touch(busy.id)).toBeDefined();
      clock.advance(20 * 60_000);
      if (hour < 11) expect(await s.touch(busy.id)).toBeDefined();
      clock.advance(20 * 60_000);
    }
    expect(await s.touch(busy.id)).toBeUndefined();
  });

  it("keeps only the id's digest, and ends every session of a key at once", async () => {
    const s = sessions();
    const a = await s.create({ keyId: "key_many", org: "acme", user: "alice" });
    const b = await s.create({ keyId: "key_many", org: "acme", user: "alice" });
    const other = await s.create({ keyId: "key_other", org: "acme", user: "bob" });
    const stored = await scanKeys(store.redis, "gw:console-session:*");
    expect(stored.some((k) => k.includes(a.id))).toBe(false);
    await s.endAllOf("key_many");
    expect(await s.touch(a.id)).toBeUndefined();
    expect(await s.touch(b.id)).toBeUndefined();
    expect(await s.touch(other.id)).toBeDefined();
  });
});

describe("the console's audit page", () => {
  it("offers every action the trail records as a filter", async () => {
    // The browser loads the module as it is (no build step), so it keeps its own copy of core's list.
    const source = await readFile(new URL("./public/audit-records.js", import.meta.url), "utf8");
    const list = /export const AUDIT_ACTIONS = (\[[^\]]*\]);/.exec(source)?.[1];
    expect(list).toBeDefined();
    expect(JSON.parse(list!.replace(/,\s*\]$/, "]"))).toEqual([...AUDIT_ACTIONS]);
  });
});

describe("admin console over HTTP", () => {
  const gw = useGateway();

  const signIn = (secret: string, origin?: string) => consoleSignIn(gw.url, secret, origin);
  const sessionCookie = consoleSessionCookie;
  /** The shell's CSRF token. */
  async function csrfOf(cookie: string): Promise<string> {
    const shell = await fetch(`${gw.url}/admin/keys`, { headers: { Cookie: cookie } });
    expect(shell.status).toBe(200);
    return /name="csrf-token" content="([^"]+)"/.exec(await shell.text())![1]!;
  }

  it("exchanges a key with admin:console for an HttpOnly, SameSite=Strict, Secure cookie, and refuses the rest", async () => {
    const org = freshOrg();
    const root = await gw.createKey({ org, owner: "alice", permissions: [...ROOT] });
    const res = await signIn(root.secret);
    expect(res.status).toBe(303);
    expect(res.headers.get("location")).toBe("/admin/keys");
    const setCookie = res.headers.getSetCookie().find((c) => c.startsWith("gw_console="))!;
    expect(setCookie).toMatch(/HttpOnly/);
    expect(setCookie).toMatch(/SameSite=Strict/);
    expect(setCookie).toMatch(/Secure/); // the gateway's public URL is https
    expect(setCookie).not.toContain(root.secret);

    const plain = await gw.createKey({ org, owner: "bob", permissions: ["admin:api-keys", "usage:read"] });
    const refused = await signIn(plain.secret);
    expect(refused.headers.get("location")).toBe("/admin/sign-in?failed=permission");
    expect(sessionCookie(refused)).toBeUndefined();
    expect((await signIn("gwsk_not-a-key")).headers.get("location")).toBe("/admin/sign-in?failed=invalid");
    expect((await signIn(root.secret, "https://evil.example")).status).toBe(403);
  });

  it("answers every console request with the security headers", async () => {
    const root = await gw.createKey({ org: freshOrg(), owner: "alice", permissions: [...ROOT] });
    const cookie = sessionCookie(await signIn(root.secret))!;
    for (const [path, headers] of [
      ["/admin/sign-in", {}],
      ["/admin/keys", { Cookie: cookie }],
      ["/admin/assets/app.js", {}],
      ["/admin/vendor/preact.mjs", {}],
      ["/admin/api/v1/admin/api-keys", { Cookie: cookie }],
      ["/admin/api/v1/admin/api-keys", {}],
    ] as const) {
      const res = await fetch(`${gw.url}${path}`, { headers, redirect: "manual" });
      const csp = res.headers.get("content-security-policy") ?? "";
      expect(csp, path).toContain("frame-ancestors 'none'");
      expect(csp, path).toContain("script-src 'self'");
      expect(csp, path).not.toContain("unsafe-inline");
      expect(res.headers.get("x-content-type-options"), path).toBe("nosniff");
      expect(res.headers.get("referrer-policy"), path).toBe("same-origin");
    }
  });

  it("serves every module the console's scripts import, as JavaScript, from the console's own paths", async () => {
    const seen = new Set<string>();
    const pending = ["/admin/assets/app.js"];
    while (pending.length > 0) {
      const path = pending.pop()!;
      if (seen.has(path)) continue;
      seen.add(path);
      const res = await fetch(`${gw.url}${path}`);
      expect(res.status, path).toBe(200);
      expect(res.headers.get("content-type"), path).toBe("text/javascript; charset=utf-8");
      const source = await res.text();
      for (const [, specifier] of source.matchAll(/^\s*(?:import|export)\b[^"']*?from\s*"([^"]+)"/gm)) {
        const target = new URL(specifier!, `${gw.url}${path}`);
        expect(target.origin, `${specifier} in ${path}`).toBe(new URL(gw.url).origin);
        pending.push(target.pathname);
      }
    }
    // app.js, ui.js, the vendored Preact and htm, and a module per page at least.
    expect(seen.size).toBeGreaterThan(10);
  });

  it("calls the API as the session's key: CSRF token and own origin for changes, the key's own rules", async () => {
    const org = freshOrg();
    const root = await gw.createKey({ org, owner: "alice", permissions: [...ROOT] });
    const cookie = sessionCookie(await signIn(root.secret))!;
    const token = await csrfOf(cookie);
    const post = (headers: Record<string, string>) =>
      fetch(`${gw.url}/admin/api/v1/admin/api-keys`, {
        method: "POST",
        headers: { Cookie: cookie, "Content-Type": "application/json", ...headers },
        body: JSON.stringify({ owner: "svc", limits: { second: 2 } }),
      });
    expect((await post({ Origin: ORIGIN(gw.url) })).status).toBe(403);
    expect((await post({ Origin: ORIGIN(gw.url), "X-CSRF-Token": "wrong" })).status).toBe(403);
    expect((await post({ Origin: "https://evil.example", "X-CSRF-Token": token })).status).toBe(403);
    expect((await post({ "X-CSRF-Token": token })).status).toBe(403); // no Origin at all
    const created = await post({ Origin: ORIGIN(gw.url), "X-CSRF-Token": token });
    expect(created.status).toBe(201);
    expect((await created.json()).org).toBe(org);
    // The API's own validation, as JSON from its catalogue.
    const invalid = await fetch(`${gw.url}/admin/api/v1/admin/api-keys`, {
      method: "POST",
      headers: {
        Cookie: cookie,
        "Content-Type": "application/json",
        Origin: ORIGIN(gw.url),
        "X-CSRF-Token": token,
      },
      body: JSON.stringify({ owner: "svc", limits: { second: 0 } }),
    });
    expect(invalid.status).toBe(422);
    const list = await fetch(`${gw.url}/admin/api/v1/admin/api-keys`, { headers: { Cookie: cookie } });
    const keys = (await list.json()).data as { owner: string; lastUsedAt: string | null }[];
    expect(keys.map((k) => k.owner).sort()).toEqual(["alice", "svc"]);
    expect(keys.find((k) => k.owner === "alice")?.lastUsedAt).toEqual(expect.any(String));
    expect(keys.find((k) => k.owner === "svc")?.lastUsedAt).toBeNull();
  });

  it("ends a key's sessions when it is revoked or loses admin:console", async () => {
    const org = freshOrg();
    const root = await gw.createKey({ org, owner: "alice", permissions: [...ROOT] });
    for (const end of ["revoke", "permission"] as const) {
      const admin = await gw.createKey({ org, owner: `dana-${end}`, permissions: [...ROOT] });
      const cookie = sessionCookie(await signIn(admin.secret))!;
      const api = () => fetch(`${gw.url}/admin/api/v1/admin/api-keys`, { headers: { Cookie: cookie } });
      expect((await api()).status).toBe(200);
      const change =
        end === "revoke"
          ? await gw.call(`/api/v1/admin/api-keys/${admin.record.id}`, {
              method: "DELETE",
              bearer: root.secret,
            })
          : await gw.call(`/api/v1/admin/api-keys/${admin.record.id}`, {
              method: "PATCH",
              bearer: root.secret,
              json: { permissions: ["admin:api-keys"] },
            });
      expect(change.status).toBe(200);
      expect((await api()).status).toBe(401);
      expect(await gw.redis.smembers(`gw:console-sessions-of:${admin.record.id}`)).toEqual([]);
      const shell = await fetch(`${gw.url}/admin/keys`, { headers: { Cookie: cookie }, redirect: "manual" });
      expect(shell.headers.get("location")).toBe("/admin/sign-in");
    }
  });

  it("signs out on the server", async () => {
    const root = await gw.createKey({ org: freshOrg(), owner: "alice", permissions: [...ROOT] });
    const cookie = sessionCookie(await signIn(root.secret))!;
    const token = await csrfOf(cookie);
    const out = await fetch(`${gw.url}/admin/sign-out`, {
      method: "POST",
      redirect: "manual",
      headers: {
        Cookie: cookie,
        Origin: ORIGIN(gw.url),
        "Content-Type": "application/x-www-form-urlencoded",
      },
      body: new URLSearchParams({ csrf: token }),
    });
    expect(out.status).toBe(303);
    const after = await fetch(`${gw.url}/admin/api/v1/admin/api-keys`, { headers: { Cookie: cookie } });
    expect(after.status).toBe(401);
  });

  it("lets an administrator read who holds which role on any resource of the organization, audited, never another's", async () => {
    const acme = await newOrg(gw);
    const conv = await acme.create("alice");
    expect(
      (
        await acme.grant("alice", {
          resourceType: "conversation",
          resourceId: conv,
          userId: "bob",
          role: "reader",
        })
      ).status,
    ).toBe(204);
    const admin = await gw.createKey({ org: acme.org, owner: "dana", permissions: [...ROOT] });
    const grants = await gw.call(`/api/v1/admin/authorization/resources/conversation/${conv}/grants`, {
      bearer: admin.secret,
    });
    expect(grants.status).toBe(200);
    expect((await grants.json()).data).toEqual([
      { userId: "alice", role: "owner" },
      { userId: "bob", role: "reader" },
    ]);
    // dana owns nothing: the owners' route still refuses her.
    const owners = await gw.call(`/api/v1/authorization/llm/resources/conversation/${conv}/grants`, {
      bearer: admin.secret,
    });
    expect(owners.status).toBe(403);

    const readable = await gw.call(
      `/api/v1/admin/authorization/users/bob/resources?resourceType=conversation`,
      {
        bearer: admin.secret,
      },
    );
    expect((await readable.json()).data).toEqual([{ resourceId: conv }]);

    const trail = await gw.call(`/api/v1/admin/audit?action=inspect&actor=dana`, { bearer: admin.secret });
    const records = (await trail.json()).data;
    expect(
      records.map((r: { resourceId: string; subject?: string }) => [r.resourceId, r.subject ?? null]),
    ).toEqual([
      ["*", "bob"],
      [conv, null],
    ]);
    expect(records.every((r: { outcome: string }) => r.outcome === "allowed")).toBe(true);

    // Without admin:console, 403; another organization's administrator sees nothing of acme's.
    const plain = await gw.createKey({ org: acme.org, owner: "erin", permissions: ["admin:api-keys"] });
    expect(
      (
        await gw.call(`/api/v1/admin/authorization/resources/conversation/${conv}/grants`, {
          bearer: plain.secret,
        })
      ).status,
    ).toBe(403);
    const globexAdmin = await gw.createKey({ org: freshOrg(), owner: "mallory", permissions: [...ROOT] });
    const across = await gw.call(`/api/v1/admin/authorization/resources/conversation/${conv}/grants`, {
      bearer: globexAdmin.secret,
    });
    expect(across.status).toBe(403); // its id names globex's resource, of which mallory's org has none
    const acrossUser = await gw.call(
      `/api/v1/admin/authorization/users/bob/resources?resourceType=conversation`,
      {
        bearer: globexAdmin.secret,
      },
    );
    expect((await acrossUser.json()).data).toEqual([]);
  });

  it("filters the organization's trail by actor, resource, action and time", async () => {
    const acme = await newOrg(gw);
    const a = await acme.create("alice");
    const b = await acme.create("alice");
    await acme.grant("alice", { resourceType: "conversation", resourceId: a, userId: "bob", role: "reader" });
    await acme.grant("alice", { resourceType: "conversation", resourceId: b, userId: "bob", role: "reader" });
    await acme.revoke("alice", {
      resourceType: "conversation",
      resourceId: a,
      userId: "bob",
      role: "reader",
    });
    await acme.grant("carol", {
      resourceType: "conversation",
      resourceId: a,
      userId: "erin",
      role: "reader",
    });
    const admin = await gw.createKey({ org: acme.org, owner: "dana", permissions: ["admin:console"] });
    const list = async (query: Record<string, string>) => {
      const res = await gw.call(`/api/v1/admin/audit?${new URLSearchParams(query)}`, {
        bearer: admin.secret,
      });
      expect(res.status).toBe(200);
      return (await res.json()).data.map(
        (r: { action: string; resourceId: string; actor: { userId: string } }) =>
          [r.action, r.resourceId, r.actor.userId].join(" "),
      );
    };
    expect(await list({ resourceType: "conversation", resourceId: a })).toEqual([
      `grant ${a} carol`,
      `revoke ${a} alice`,
      `grant ${a} alice`,
    ]);
    expect(await list({ action: "revoke" })).toEqual([`revoke ${a} alice`]);
    expect(await list({ actor: "carol" })).toEqual([`grant ${a} carol`]);
    expect(await list({ since: new Date(Date.now() + 60_000).toISOString() })).toEqual([]);
    expect(await list({ until: new Date(Date.now() - 3_600_000).toISOString() })).toEqual([]);
    expect((await list({ until: new Date(Date.now() + 60_000).toISOString() })).length).toBe(4);
    const bad = await gw.call(`/api/v1/admin/audit?action=sing`, { bearer: admin.secret });
    expect(bad.status).toBe(422);
  });

  it("shows where each window of a key stands now", async () => {
    const org = freshOrg();
    const root = await gw.createKey({ org, owner: "alice", permissions: [...ROOT] });
    const limited = await gw.createKey({ org, owner: "svc", limits: { minute: 10, tokens: { day: 5000 } } });
    for (let i = 0; i < 3; i++)
      expect((await gw.call("/api/v1/authentication/whoami", { bearer: limited.secret })).status).toBe(200);
    const res = await gw.call(`/api/v1/admin/api-keys/${limited.record.id}/usage`, { bearer: root.secret });
    expect(res.status).toBe(200);
    const body = await res.json();
    const minute = body.windows.find(
      (w: { unit: string; window: string }) => w.unit === "requests" && w.window === "minute",
    );
    expect(minute).toMatchObject({ scope: "key", limit: 10, used: 3, remaining: 7 });
    expect(body.windows.find((w: { unit: string }) => w.unit === "tokens")).toMatchObject({
      limit: 5000,
      used: 0,
    });
    const other = await gw.createKey({ org: freshOrg(), owner: "x", permissions: ["admin:api-keys"] });
    expect(
      (await gw.call(`/api/v1/admin/api-keys/${limited.record.id}/usage`, { bearer: other.secret })).status,
    ).toBe(404);
  });
});

describe("the tool servers page", () => {
  it("is offered only when the gateway serves GET /api/v1/mcp/servers", async () => {
    const { default: express, Router } = await import("express");
    const without = express();
    without.use(
      "/api/v1",
      Router().get("/llm/models", (_req, res) => res.end()),
    );
    expect(hasMcpRoutes(without)).toBe(false);
    const direct = express();
    direct.use(
      "/api/v1",
      Router().get("/mcp/servers", (_req, res) => res.end()),
    );
    expect(hasMcpRoutes(direct)).toBe(true);
  });
});
