import { createHash, randomBytes } from "node:crypto";
import { type FakeMcpServer, startFakeMcpServer } from "@gw/test-kit/mcp-upstream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ConsoleStack, newContext, signIn, startConsoleStack, watch } from "./console-browser.ts";

const poll = <T>(read: () => T | Promise<T>) => expect.poll(read, { timeout: 15_000 });
const REDIRECT = "http://127.0.0.1:47123/callback";
const hidden = (html: string, name: string) =>
  new RegExp(`name="${name}" value="([^"]+)"`).exec(html)?.[1]?.replaceAll("&amp;", "&");

/** An MCP host's OAuth flow against the stack, by hand: registration, sign-in with `key`, consent, the code exchange. */
async function authorizeClient(url: string, resource: string, key: string): Promise<string> {
  const registered = await fetch(`${url}/oauth/register`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ client_name: "Desk MCP host", redirect_uris: [REDIRECT] }),
  });
  expect(registered.status).toBe(201);
  const { client_id: clientId } = (await registered.json()) as { client_id: string };
  const verifier = randomBytes(32).toString("base64url");
  const authorize = new URL(`${url}/oauth/authorize`);
  for (const [name, value] of Object.entries({
    response_type: "code",
    client_id: clientId,
    redirect_uri: REDIRECT,
    code_challenge: createHash("sha256").update(verifier).digest("base64url"),
    code_challenge_method: "S256",
    resource,
  }))
    authorize.searchParams.set(name, value);
  const form = { "content-type": "application/x-www-form-urlencoded" };
  const request = hidden(await (await fetch(authorize)).text(), "request")!;
  const signedIn = await fetch(`${url}/oauth/authorize`, {
    method: "POST",
    headers: form,
    body: new URLSearchParams({ request, step: "sign-in", key }),
  });
  const consentHtml = await signedIn.text();
  expect(signedIn.status, consentHtml).toBe(200);
  const cookie = signedIn.headers
    .getSetCookie()
    .map((c) => c.split(";")[0])
    .join("; ");
  const answered = await fetch(`${url}/oauth/authorize`, {
    method: "POST",
    redirect: "manual",
    headers: { ...form, cookie },
    body: new URLSearchParams({
      request,
      step: "consent",
      consent: hidden(consentHtml, "consent")!,
      decision: "allow",
    }),
  });
  const code = new URL(answered.headers.get("location")!).searchParams.get("code")!;
  const tokens = await fetch(`${url}/oauth/token`, {
    method: "POST",
    headers: form,
    body: new URLSearchParams({
      grant_type: "authorization_code",
      client_id: clientId,
      code,
      code_verifier: verifier,
      redirect_uri: REDIRECT,
    }),
  });
  expect(tokens.status).toBe(200);
  return ((await tokens.json()) as { access_token: string }).access_token;
}

/** The console's "Authorized clients" on the Tool servers page, in Debian's Chromium against `pnpm start`. */
describe("admin console: MCP clients authorized with OAuth", () => {
  let s: ConsoleStack;
  let upstream: FakeMcpServer;
  beforeAll(async () => {
    [s, upstream] = await Promise.all([startConsoleStack("gw-console-oauth-"), startFakeMcpServer()]);
  }, 180_000);
  afterAll(async () => {
    await Promise.all([s?.close(), upstream?.close()]);
  });

  it("lists a client a user authorized and revokes it: the client's next MCP call is refused", async () => {
    const registered = await fetch(`${s.url}/api/v1/mcp/servers`, {
      method: "POST",
      headers: { Authorization: `Bearer ${s.root.key}`, "Content-Type": "application/json" },
      body: JSON.stringify({ name: "docs", url: upstream.url, description: "The team's documents" }),
    });
    expect(registered.status).toBe(201);
    const { id } = (await registered.json()) as { id: string };
    const proxy = `${s.url}/api/v1/mcp/servers/${id}/mcp`;
    const { resource } = (await (
      await fetch(`${s.url}/.well-known/oauth-protected-resource/api/v1/mcp/servers/${id}/mcp`)
    ).json()) as { resource: string };
    const accessToken = await authorizeClient(s.url, resource, s.root.key);
    const listTools = () =>
      fetch(proxy, {
        method: "POST",
        headers: {
          Authorization: `Bearer ${accessToken}`,
          "Content-Type": "application/json",
          Accept: "application/json, text/event-stream",
          "MCP-Protocol-Version": "2025-11-25",
        },
        body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" }),
      });
    expect((await listTools()).status).toBe(200);

    const context = await newContext(s.browser, { width: 1280, height: 800 });
    const page = await context.newPage();
    const seen = watch(page);
    page.setDefaultTimeout(20_000);
    await signIn(page, s.url, s.root.key);
    await page.goto(`${s.url}/admin/tools`);
    const clients = page.getByRole("table", { name: /^MCP clients the organization's users signed in with/ });
    const row = clients.getByRole("row").filter({ hasText: "Desk MCP host" });
    await poll(() => row.textContent()).toContain("alice");
    expect(await row.textContent()).toContain(id);
    await row.getByRole("button", { name: "Revoke Desk MCP host for alice" }).click();
    await page.getByRole("button", { name: "Yes, revoke" }).click();
    await poll(() => page.getByText("Desk MCP host can no longer act for alice.").isVisible()).toBe(true);
    await poll(() => clients.textContent()).toContain("No authorized clients.");

    const refused = await listTools();
    expect(refused.status).toBe(401);
    expect(await refused.json()).toMatchObject({
      jsonrpc: "2.0",
      error: { message: expect.stringMatching(/revoked/) },
    });
    expect(seen.errors).toEqual([]);
    expect(seen.dialogs).toEqual([]);
    await context.close();
  }, 120_000);
});
