import { randomUUID } from "node:crypto";
import { localRedisUrl } from "@gw/core/redis";
import { testRedisClient } from "@gw/test-kit";
import { startFakeMcpServer } from "@gw/test-kit/mcp-upstream";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  type ConsoleStack,
  createKeyFor,
  newContext,
  respond,
  signIn,
  startConsoleStack,
  watch,
} from "./console-browser.ts";

/**
 * `expect.poll` with the patience of a page's own waits: what the page shows comes from the gateway, which a
 * loaded machine (a whole suite, a `pnpm start` beside it) may take seconds to answer; vitest's default is 1 s.
 */
const poll = <T>(read: () => T | Promise<T>) => expect.poll(read, { timeout: 15_000 });

const DESKTOP = { width: 1280, height: 800 };
const XSS = "<img src=x onerror=alert(1)>";

/** The admin console in Debian's Chromium against `pnpm start`. */
describe("admin console", () => {
  let s: ConsoleStack;
  beforeAll(async () => {
    s = await startConsoleStack("gw-console-");
  }, 180_000);
  afterAll(async () => {
    await s?.close();
  });

  it("signs in, makes a limited key whose secret works, shows its traffic and spend, and an owner revokes a grant seen in the trail", async () => {
    const context = await newContext(s.browser, DESKTOP);
    const page = await context.newPage();
    const seen = watch(page);
    page.setDefaultTimeout(20_000);

    const first = await page.goto(`${s.url}/admin/`);
    expect(page.url()).toBe(`${s.url}/admin/sign-in`);
    const headers = first!.headers();
    expect(headers["content-security-policy"]).toContain("frame-ancestors 'none'");
    expect(headers["content-security-policy"]).toContain("script-src 'self'");
    expect(headers["content-security-policy"]).not.toContain("unsafe-inline");
    expect(headers["x-content-type-options"]).toBe("nosniff");
    expect(headers["referrer-policy"]).toBe("same-origin");

    await signIn(page, s.url, s.root.key);
    expect(page.url()).toBe(`${s.url}/admin/keys`);
    const cookie = (await context.cookies()).find((c) => c.name === "gw_console");
    expect(cookie).toMatchObject({ httpOnly: true, sameSite: "Strict" });
    expect(cookie?.value).not.toContain(s.root.key);
    await poll(() => page.getByRole("table", { name: "Keys of acme" }).isVisible()).toBe(true);

    // A key with second and tokens:minute limits and a model allowlist, named to try an injection.
    await page.getByRole("button", { name: "New key" }).click();
    await page.getByLabel("Name").fill(XSS);
    await page.getByLabel("Owner (user id)").fill("svc");
    await page.locator("#new-req-second").fill("5");
    await page.locator("#new-tok-minute").fill("100000");
    await page.getByLabel("Models (allowlist, comma-separated; empty: any)").fill("echo-small");
    await page.getByRole("button", { name: "Create key" }).click();
    const secret = await page.locator("#new-secret").inputValue();
    expect(secret.length).toBeGreaterThan(20);
    await poll(() => page.getByRole("cell", { name: XSS, exact: true }).count()).toBe(1);
    expect(await page.locator('img[src="x"]').count()).toBe(0);
    const row = page.getByRole("row").filter({ hasText: "svc" });
    await poll(() => row.textContent()).toContain("5 requests/second");
    expect(await row.textContent()).toContain("100000 tokens/minute");
    expect(await row.textContent()).toContain("echo-small");

    // The secret works against the API, within its allowlist.
    for (let i = 0; i < 3; i++) expect((await respond(s.url, secret, "echo-small", "erin")).status).toBe(200);
    expect((await respond(s.url, secret, "echo-large")).status).toBe(403);

    // Its traffic and spend in usage.
    await page.goto(`${s.url}/admin/usage`);
    await poll(() => page.getByTestId("total-requests").textContent()).toBe("3");
    expect(
      Number((await page.getByTestId("total-tokens").textContent())!.replaceAll(",", "")),
    ).toBeGreaterThan(0);
    expect(await page.getByTestId("total-cost").textContent()).not.toBe("$0.00");
    const perKey = page.getByRole("table", { name: "Per key" });
    const teamRow = perKey.getByRole("row").filter({ hasText: XSS });
    await poll(() => teamRow.getByRole("cell").nth(1).textContent()).toBe("3");
    expect(await page.getByRole("table", { name: "Per end user" }).textContent()).toContain("erin");
    // Each model's calls by the deployment that served them: its provider and upstream model.
    const served = page.getByRole("table", { name: /^Per model and the deployment that served it/ });
    const deploymentRow = served.getByRole("row").filter({ hasText: "openai" });
    await poll(() => deploymentRow.getByRole("cell").nth(2).textContent()).toBe("echo-small");
    expect(await deploymentRow.getByRole("cell").nth(3).textContent()).toBe("3");
    expect(await page.locator("canvas").count()).toBeGreaterThanOrEqual(3);
    const keyId = await keyIdBySecretStart(page, secret);
    await page.locator("#windows-key").selectOption(keyId);
    await page.getByRole("button", { name: "Show windows" }).click();
    const windows = page.getByRole("table", { name: "Each window of each unit: used, limit, resets at" });
    await poll(() => windows.textContent()).toContain("second");
    expect(await windows.textContent()).toContain("100,000");

    // Change its limits, models and policy; the API then holds it to them.
    await page.goto(`${s.url}/admin/keys`);
    await page.getByRole("button", { name: `Change key ${XSS}` }).click();
    await page.locator("#edit-req-second").fill("");
    await page.locator("#edit-req-minute").fill("50");
    await page.getByLabel("Models (allowlist, comma-separated; empty: any)").fill("echo-small, echo-large");
    await page.getByLabel("On-behalf-of policy").selectOption("none");
    await page.getByRole("button", { name: "Save changes" }).click();
    await poll(() => page.getByRole("status").textContent()).toContain("changed");
    const changed = page.getByRole("row").filter({ hasText: "svc" });
    expect(await changed.textContent()).toContain("50 requests/minute");
    expect(await changed.textContent()).not.toContain("requests/second");
    expect(await changed.textContent()).toContain("echo-small, echo-large");
    expect(await changed.textContent()).toContain("its owner only");
    expect((await respond(s.url, secret, "echo-large")).status).toBe(200);
    expect((await respond(s.url, secret, "echo-small", "erin")).status).toBe(403); // no end users now

    // Access: alice owns a conversation and bob reads it; she revokes it here.
    const conv = await fetch(`${s.url}/api/v1/llm/conversations`, {
      method: "POST",
      headers: { Authorization: `Bearer ${s.root.key}`, "Content-Type": "application/json" },
      body: "{}",
    }).then((r) => r.json() as Promise<{ id: string }>);
    const granted = await fetch(`${s.url}/api/v1/authorization/llm/grant`, {
      method: "POST",
      headers: { Authorization: `Bearer ${s.root.key}`, "Content-Type": "application/json" },
      body: JSON.stringify({
        resourceType: "conversation",
        resourceId: conv.id,
        userId: "bob",
        role: "reader",
      }),
    });
    expect(granted.status).toBe(204);
    await page.goto(`${s.url}/admin/access`);
    await page.getByLabel("Resource id").fill(conv.id);
    await page.getByRole("button", { name: "Show access" }).click();
    const who = page.getByRole("table", { name: "Who holds which role" });
    await poll(() => who.getByRole("row").filter({ hasText: "bob" }).textContent()).toContain("reader");
    await page.getByRole("button", { name: "Revoke reader from bob" }).click();
    await page.getByRole("button", { name: "Yes, revoke" }).click();
    await poll(() => page.getByRole("status").textContent()).toContain("Revoked reader from bob");
    expect(await who.textContent()).not.toContain("bob");
    const trail = page.getByRole("table", { name: "Audit trail of this resource, newest first" });
    await poll(() => trail.getByRole("row").nth(1).textContent()).toContain("revoke");
    expect(await trail.getByRole("row").nth(1).textContent()).toContain("bob");

    // The organization's trail, filtered by action.
    await page.goto(`${s.url}/admin/audit`);
    await page.getByLabel("Action").selectOption("revoke");
    await page.getByRole("button", { name: "Filter" }).click();
    const org = page.getByRole("table", { name: "The organization's audit trail, newest first" });
    await poll(() => org.textContent()).toContain(conv.id);
    expect(await org.getByRole("row").nth(1).textContent()).toMatch(/revoke.*bob.*reader.*allowed/);

    // Every other page too, with no console error anywhere.
    // Eval schedules: list, runs, delete with a confirmation.
    const schedule = await fetch(`${s.url}/api/v1/llm/evals/schedules`, {
      method: "POST",
      headers: { Authorization: `Bearer ${s.root.key}`, "Content-Type": "application/json" },
      body: JSON.stringify({
        name: "nightly",
        model: "echo-small",
        inputs: [{ input: "2+2", expected: "4" }],
        cron: "0 3 * * *",
      }),
    }).then((r) => r.json() as Promise<{ id: string }>);
    await page.goto(`${s.url}/admin/evals`);
    const schedules = page.getByRole("table", { name: "The organization's eval schedules" });
    await poll(() => schedules.textContent()).toContain(schedule.id);
    await page.getByRole("button", { name: "Runs of nightly" }).click();
    await poll(() => page.getByRole("table", { name: `Runs of ${schedule.id}` }).isVisible()).toBe(true);
    await page.getByRole("button", { name: "Delete nightly" }).click();
    await page.getByRole("button", { name: "Yes, delete" }).click();
    await poll(() => page.getByRole("status").textContent()).toContain("deleted");
    expect(await schedules.textContent()).not.toContain(schedule.id);
    const gone = await fetch(`${s.url}/api/v1/llm/evals/schedules/${schedule.id}`, {
      headers: { Authorization: `Bearer ${s.root.key}` },
    });
    expect(gone.status).toBe(404);
    expect(seen.dialogs).toEqual([]);
    expect(seen.errors).toEqual([]);
    await context.close();
  }, 180_000);

  it("is readable at 390×844 on every page, with no console error", async () => {
    const context = await newContext(s.browser, { width: 390, height: 844 });
    const page = await context.newPage();
    page.setDefaultTimeout(20_000);
    const seen = watch(page);
    await signIn(page, s.url, s.root.key);
    for (const path of ["keys", "usage", "access?userId=bob", "audit", "evals", "guardrails", "tools"]) {
      await page.goto(`${s.url}/admin/${path}`);
      await page.waitForLoadState("networkidle");
      const overflow = await page.evaluate<number>(
        "document.documentElement.scrollWidth - window.innerWidth",
      );
      expect(overflow, `${path} fits 390 px`).toBeLessThanOrEqual(0);
      expect(await page.getByRole("heading", { level: 1 }).count(), path).toBe(1);
    }
    expect(await page.getByRole("heading", { level: 1 }).textContent()).toBe("Tool servers");
    expect(seen.errors).toEqual([]);
    await context.close();
  }, 60_000);

  it("shows a registered MCP server, its tools with their roles and its credentials, never a secret, and who holds which role on it", async () => {
    const upstream = await startFakeMcpServer();
    try {
      const api = async (method: string, path: string, body?: unknown) => {
        const res = await fetch(`${s.url}/api/v1${path}`, {
          method,
          headers: { Authorization: `Bearer ${s.root.key}`, "Content-Type": "application/json" },
          ...(body === undefined ? {} : { body: JSON.stringify(body) }),
        });
        expect(res.status, `${method} ${path}: ${res.status}`).toBeLessThan(300);
        return res.status === 204 ? undefined : res.json();
      };
      const server = (await api("POST", "/mcp/servers", {
        name: "docs",
        url: upstream.url,
        description: "The team's documents",
      })) as { id: string };
      const secret = `tok-${randomUUID()}`;
      await api("PUT", `/mcp/servers/${server.id}/credentials/shared`, { type: "bearer", token: secret });
      await api("PUT", `/mcp/servers/${server.id}/tools/send_email`, { required_role: "owner" });
      await api("POST", "/authorization/llm/grant", {
        resourceType: "mcp_server",
        resourceId: server.id,
        userId: "bob",
        role: "reader",
      });

      const context = await newContext(s.browser, DESKTOP);
      const page = await context.newPage();
      page.setDefaultTimeout(20_000);
      const seen = watch(page);
      const bodies: Promise<string>[] = [];
      page.on("response", (r) => bodies.push(r.text().catch(() => "")));
      await signIn(page, s.url, s.root.key);
      await page.getByRole("link", { name: "Tool servers" }).click();
      await page.waitForURL(`${s.url}/admin/tools`);
      const servers = page.getByRole("table", { name: "MCP servers of the organization" });
      const row = servers.getByRole("row").filter({ hasText: server.id });
      await poll(() => row.textContent()).toContain("docs");
      expect(await row.textContent()).toContain(upstream.url);
      expect(await row.textContent()).toContain("The team's documents");
      expect(await row.textContent()).toContain(new Date().getUTCFullYear().toString());

      await page.getByRole("button", { name: "Tools and credentials of docs" }).click();
      const tools = page.getByRole("table", { name: "Tools of docs and the role each needs" });
      const roleOf = async (tool: string) =>
        (
          await tools
            .getByRole("row")
            .filter({ has: page.getByRole("cell", { name: tool, exact: true }) })
            .getByRole("cell")
            .allTextContents()
        )[3];
      await poll(() => roleOf("search")).toBe("reader");
      expect(await roleOf("read_file")).toBe("reader");
      expect(await roleOf("delete_file")).toBe("writer");
      expect(await roleOf("send_email")).toBe("owner");
      expect(await tools.textContent()).toContain("Search the documents");

      const credentials = page.getByRole("table", {
        name: "Credentials of docs, by scope and date (never a secret)",
      });
      const shared = credentials.getByRole("row").filter({ hasText: "shared" });
      const cells = await shared.getByRole("cell").allTextContents();
      expect(cells.slice(0, 3)).toEqual(["shared", "bearer", "—"]);
      expect(cells[3]).toContain(new Date().getUTCFullYear().toString());
      // Last used: when the role set above asked the server for its tools with it (an answer that
      // describes the tool), in UTC as every date of the console.
      expect(cells[4]).toMatch(
        new RegExp(`^${new Date().getUTCFullYear()}-\\d\\d-\\d\\d \\d\\d:\\d\\d:\\d\\d UTC$`),
      );

      // Who holds which role on the server, from its id.
      await servers.getByRole("link", { name: "Who holds which role on docs" }).click();
      await page.waitForURL(/\/admin\/access\?/);
      expect(await page.locator("#access-type").inputValue()).toBe("mcp_server");
      const who = page.getByRole("table", { name: "Who holds which role" });
      await poll(() => who.getByRole("row").filter({ hasText: "bob" }).textContent()).toContain("reader");
      expect(await who.getByRole("row").filter({ hasText: "alice" }).textContent()).toContain("owner");
      // The owner grants from here too; the API then holds carol to it.
      await page.getByLabel("User id (or *)").fill("carol");
      await page.locator("#grant-role").selectOption("writer");
      await page.getByRole("button", { name: "Grant", exact: true }).click();
      await poll(() => page.getByRole("status").textContent()).toContain("Granted writer to carol");
      const grants = (await api("GET", `/admin/authorization/resources/mcp_server/${server.id}/grants`)) as {
        data: { userId: string; role: string }[];
      };
      expect(grants.data).toContainEqual(expect.objectContaining({ userId: "carol", role: "writer" }));
      const trail = page.getByRole("table", { name: "Audit trail of this resource, newest first" });
      await poll(() => trail.getByRole("row").nth(1).textContent()).toContain("grant");

      // A tool called through the proxy: its record in the organization's trail names the tool.
      const client = new Client({ name: "console-test", version: "1.0.0" });
      await client.connect(
        new StreamableHTTPClientTransport(new URL(`${s.url}/api/v1/mcp/servers/${server.id}/mcp`), {
          requestInit: { headers: { authorization: `Bearer ${s.root.key}` } },
        }),
      );
      await client.callTool({ name: "search", arguments: { query: "q" } });
      await client.close();
      await page.goto(`${s.url}/admin/audit`);
      const org = page.getByRole("table", { name: "The organization's audit trail, newest first" });
      await poll(() => org.getByRole("row").filter({ hasText: "call" }).first().textContent()).toContain(
        `mcp_server:${server.id} tool search`,
      );

      // Choosing the type in the form also finds it.
      await page.goto(`${s.url}/admin/access`);
      await page.locator("#access-type").selectOption("mcp_server");
      await page.getByLabel("Resource id").fill(server.id);
      await page.getByRole("button", { name: "Show access" }).click();
      await poll(() => who.getByRole("row").filter({ hasText: "carol" }).textContent()).toContain("writer");

      // A user's view lists the servers they can read.
      await page.goto(`${s.url}/admin/access?userId=bob`);
      const readable = page.getByRole("table", { name: "Resources bob can read, by type" });
      await poll(() => readable.getByRole("row").filter({ hasText: "mcp_server" }).textContent()).toContain(
        server.id,
      );

      await page.waitForLoadState("networkidle");
      const fetched = await Promise.all(bodies);
      expect(fetched.some((b) => b.includes(server.id))).toBe(true);
      for (const body of fetched) expect(body).not.toContain(secret);
      await page.goto(`${s.url}/admin/tools`);
      await page.getByRole("button", { name: "Tools and credentials of docs" }).click();
      await credentials.waitFor();
      expect(await page.content()).not.toContain(secret);
      expect((await Promise.all(bodies)).join("\n")).not.toContain(secret);
      expect(seen.errors).toEqual([]);
      await context.close();
    } finally {
      await upstream.close();
    }
  }, 120_000);

  it("reads a key's expiry as the UTC its label says, in a browser of another time zone", async () => {
    const context = await s.browser.newContext({
      viewport: DESKTOP,
      deviceScaleFactor: 1,
      // UTC+5:30 all year: a field read as local time would be five and a half hours off.
      timezoneId: "Asia/Kolkata",
    });
    const page = await context.newPage();
    page.setDefaultTimeout(20_000);
    await signIn(page, s.url, s.root.key);
    const owner = `tz-${randomUUID().slice(0, 8)}`;
    await page.getByRole("button", { name: "New key" }).click();
    await page.getByLabel("Name").fill("expiring");
    await page.getByLabel("Owner (user id)").fill(owner);
    await page.getByLabel("Expires at (UTC, empty: never)").fill("2030-01-02T03:04");
    await page.getByRole("button", { name: "Create key" }).click();
    expect((await page.locator("#new-secret").inputValue()).length).toBeGreaterThan(20);
    const keys = await fetch(`${s.url}/api/v1/admin/api-keys`, {
      headers: { Authorization: `Bearer ${s.root.key}` },
    }).then((r) => r.json() as Promise<{ data: { owner: string; expiresAt: string | null }[] }>);
    expect(keys.data.find((k) => k.owner === owner)?.expiresAt).toBe("2030-01-02T03:04:00.000Z");
    await context.close();
  }, 60_000);

  it("is usable with the keyboard alone", async () => {
    const context = await newContext(s.browser, DESKTOP);
    const page = await context.newPage();
    page.setDefaultTimeout(20_000);
    await page.goto(`${s.url}/admin/sign-in`);
    // The key field has the focus (autofocus applies once the page has loaded; typing before loses keys).
    await poll(() => page.evaluate<string>("document.activeElement.id")).toBe("key");
    await page.keyboard.type(s.root.key);
    await page.keyboard.press("Enter");
    await page.waitForURL(`${s.url}/admin/keys`);
    await page.keyboard.press("Tab");
    expect(await page.evaluate<string>("document.activeElement.textContent")).toBe("Skip to content");
    const revoke = page.getByRole("button", { name: /^Revoke key / }).first();
    await revoke.focus();
    await page.keyboard.press("Enter");
    const dialog = page.getByRole("dialog", { name: "Revoke this key?" });
    await poll(() => dialog.isVisible()).toBe(true);
    await page.keyboard.press("Escape");
    await poll(() => dialog.count()).toBe(0);
    const keys = await fetch(`${s.url}/api/v1/admin/api-keys`, {
      headers: { Authorization: `Bearer ${s.root.key}` },
    }).then((r) => r.json() as Promise<{ data: { status: string; name: string | null }[] }>);
    expect(keys.data.find((k) => k.name === "root")?.status).toBe("active");
    await context.close();
  }, 60_000);

  it("refuses a state-changing request without the CSRF token, and one from another origin", async () => {
    const context = await newContext(s.browser, DESKTOP);
    const page = await context.newPage();
    await signIn(page, s.url, s.root.key);
    const withoutToken = await page.evaluate(async () => {
      const res = await fetch("/admin/api/v1/admin/api-keys", {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify({ owner: "mallory" }),
      });
      return res.status;
    });
    expect(withoutToken).toBe(403);
    const token = await page.locator('meta[name="csrf-token"]').getAttribute("content");
    const cookie = (await context.cookies()).find((c) => c.name === "gw_console")!;
    const post = (origin: string) =>
      fetch(`${s.url}/admin/api/v1/admin/api-keys`, {
        method: "POST",
        headers: {
          Cookie: `gw_console=${cookie.value}`,
          "X-CSRF-Token": token!,
          Origin: origin,
          "Content-Type": "application/json",
        },
        body: JSON.stringify({ owner: "mallory" }),
      });
    expect((await post("http://evil.example")).status).toBe(403);
    expect((await post(s.url)).status).toBe(201); // the same request from the console's own origin
    const keys = await fetch(`${s.url}/api/v1/admin/api-keys`, {
      headers: { Authorization: `Bearer ${s.root.key}` },
    }).then((r) => r.json() as Promise<{ data: { owner: string }[] }>);
    expect(keys.data.filter((k) => k.owner === "mallory")).toHaveLength(1);
    await context.close();
  }, 60_000);

  it("ends a revoked key's sessions, signs out on the server, and lets no key without admin:console in", async () => {
    const admin = await createKeyFor(s, "dana", "admin:console,admin:api-keys,usage:read");
    const context = await newContext(s.browser, DESKTOP);
    const page = await context.newPage();
    await signIn(page, s.url, admin.key);
    expect(page.url()).toBe(`${s.url}/admin/keys`);
    expect(await page.getByRole("link", { name: "Keys" }).count()).toBe(1);
    expect(await page.getByRole("link", { name: "Tool servers" }).count()).toBe(0); // no mcp:read
    const revoked = await fetch(`${s.url}/api/v1/admin/api-keys/${admin.id}`, {
      method: "DELETE",
      headers: { Authorization: `Bearer ${s.root.key}` },
    });
    expect(revoked.status).toBe(200);
    await page.goto(`${s.url}/admin/usage`);
    expect(page.url()).toBe(`${s.url}/admin/sign-in`);

    // Sign-out ends the session on the server: the old cookie no longer opens anything.
    await signIn(page, s.url, s.root.key);
    const cookie = (await context.cookies()).find((c) => c.name === "gw_console")!;
    await page.getByRole("button", { name: "Sign out" }).click();
    await page.waitForURL(`${s.url}/admin/sign-in?signed_out=1`);
    const replayed = await fetch(`${s.url}/admin/api/v1/admin/api-keys`, {
      headers: { Cookie: `gw_console=${cookie.value}` },
    });
    expect(replayed.status).toBe(401);

    const plain = await createKeyFor(s, "erin", "usage:read,admin:api-keys");
    await signIn(page, s.url, plain.key);
    expect(page.url()).toBe(`${s.url}/admin/sign-in?failed=permission`);
    expect(await page.getByRole("alert").textContent()).toContain("lacks the admin:console permission");
    expect((await context.cookies()).find((c) => c.name === "gw_console")).toBeUndefined();
    await context.close();
  }, 60_000);

  it("refuses sign-ins from an address after too many failures, saying how long to wait, and lets it in once the window is over", async () => {
    const redis = testRedisClient(localRedisUrl(s.env));
    // The window's counts, in Redis: cleared to start from none (earlier cases failed a sign-in or two from
    // this address) and to end the window early.
    const clearCounts = async () => {
      const counts = await redis.keys("gw:console-sign-in:*");
      if (counts.length > 0) await redis.del(...counts);
    };
    const context = await newContext(s.browser, DESKTOP);
    const page = await context.newPage();
    try {
      await clearCounts();
      for (let i = 0; i < 10; i++) {
        await signIn(page, s.url, `gwsk_wrong-${i}`);
        expect(page.url()).toBe(`${s.url}/admin/sign-in?failed=invalid`);
      }
      const answered = page.waitForResponse(
        (r) => r.url() === `${s.url}/admin/sign-in` && r.request().method() === "POST",
      );
      await signIn(page, s.url, s.root.key); // the right key, from an address refused
      const refused = await answered;
      expect(refused.status()).toBe(429);
      expect(Number(refused.headers()["retry-after"])).toBeGreaterThan(0);
      expect(await page.getByRole("alert").textContent()).toMatch(
        /^Too many failed sign-in attempts\. Wait 1[45] minutes, then try again\.$/,
      );
      expect((await context.cookies()).find((c) => c.name === "gw_console")).toBeUndefined();

      // Once the window is over, the form on that page signs in.
      await clearCounts();
      await page.getByLabel("API key with admin:console").fill(s.root.key);
      await page.getByRole("button", { name: "Sign in" }).click();
      await page.waitForURL(`${s.url}/admin/keys`);
    } finally {
      await clearCounts();
      redis.disconnect();
      await context.close();
    }
  }, 60_000);
});

async function keyIdBySecretStart(page: import("playwright-core").Page, secret: string): Promise<string> {
  const ids = await page
    .locator("#windows-key option")
    .evaluateAll((options) => options.map((o) => (o as unknown as { value: string }).value).filter(Boolean));
  const res = await page.evaluate(async () => (await fetch("/admin/api/v1/admin/api-keys")).json());
  const key = (res as { data: { id: string; start: string }[] }).data.find((k) => secret.startsWith(k.start));
  if (!key || !ids.includes(key.id)) throw new Error("the new key is not offered");
  return key.id;
}
