import { createHash, randomBytes } from "node:crypto";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { PERMISSIONS } from "@gw/core/permissions";
import { MemoryProvider } from "@gw/test-kit/mcp-oauth-client";
import { type FakeMcpServer, startFakeMcpServer } from "@gw/test-kit/mcp-upstream";
import { startOidcProvider, type TestOidcProvider } from "@gw/test-kit/oidc-provider";
import { UnauthorizedError } from "@modelcontextprotocol/sdk/client/auth.js";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { BrowserContext } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ConsoleStack, newContext, signIn, startConsoleStack, watch } from "./console-browser.ts";
import { createKey } from "./pnpm-start.ts";

const poll = <T>(read: () => T | Promise<T>) => expect.poll(read, { timeout: 15_000 });
const CLIENT_NAME = "Desk MCP host";
/** Where an editor's MCP host (Cursor's form) has the browser send it back: its own scheme (RFC 8252 7.1). */
const CURSOR_REDIRECT = "cursor://anysphere.cursor-retrieval/oauth/user-docs/callback";

/**
 * A native MCP host as the SDK's OAuth client sees it: it keeps what it registered, its tokens and its
 * PKCE verifier, and listens on a loopback port of its own for the browser's return (RFC 8252 7.3), or
 * has the browser hand it a URL of its own scheme (`scheme`, RFC 8252 7.1).
 */
class DeskHost extends MemoryProvider {
  /** Every authorization URL the SDK asked the host to open, in order. */
  opened: URL[] = [];
  private readonly listener: Server;
  private readonly codes: string[] = [];
  private waiting: ((code: string) => void) | undefined;
  readonly scheme: string | undefined;
  private constructor(listener: Server, name: string, scheme: string | undefined) {
    super(
      () => scheme ?? `http://127.0.0.1:${(listener.address() as AddressInfo).port}/callback`,
      undefined,
      name,
    );
    this.listener = listener;
    this.scheme = scheme;
  }

  static async start(name = CLIENT_NAME, scheme?: string): Promise<DeskHost> {
    const listener = createServer();
    const host = new DeskHost(listener, name, scheme);
    listener.on("request", (req, res) => {
      const code = new URL(req.url ?? "/", "http://127.0.0.1").searchParams.get("code");
      res.setHeader("content-type", "text/html; charset=utf-8");
      res.end("<!doctype html><title>Signed in</title><p>You may close this window.</p>");
      if (code) {
        if (host.waiting) host.waiting(code);
        else host.codes.push(code);
      }
    });
    await new Promise<void>((resolve) => listener.listen(0, "127.0.0.1", resolve));
    return host;
  }

  /** The next code the browser brings back to the listener. */
  nextCode(): Promise<string> {
    const code = this.codes.shift();
    if (code) return Promise.resolve(code);
    return new Promise((resolve) => (this.waiting = resolve));
  }

  /** What the SDK forgets when the gateway refuses them (a revoked refresh token: the tokens). */
  invalidateCredentials(scope: "all" | "client" | "tokens" | "verifier" | "discovery") {
    if (scope === "all" || scope === "tokens") this.saved = undefined;
    if (scope === "all" || scope === "client") this.client = undefined;
    if (scope === "all" || scope === "verifier") this.verifier = "";
  }
  override redirectToAuthorization(url: URL) {
    super.redirectToAuthorization(url);
    this.opened.push(url);
  }
  close() {
    return new Promise<void>((resolve) => {
      this.listener.closeAllConnections();
      this.listener.close(() => resolve());
    });
  }
}

/**
 * The OAuth flow of MCP hosts that sign their user in, in Debian's Chromium against `pnpm start`: the TypeScript SDK's
 * OAuth client knows only the server's URL; its user signs in at the organization's OpenID provider
 * (the test kit's `oidc-provider`) and consents at the gateway in the browser.
 */
describe("an MCP host signs its user in through the organization's OpenID provider, in a browser", () => {
  let s: ConsoleStack;
  let upstream: FakeMcpServer;
  let idp: TestOidcProvider;
  const contexts: BrowserContext[] = [];
  const hosts: DeskHost[] = [];
  beforeAll(async () => {
    [s, upstream] = await Promise.all([
      startConsoleStack("gw-mcp-oauth-browser-", { MCP_OAUTH_ALLOW_PRIVATE_IDENTITY_PROVIDERS: "true" }),
      startFakeMcpServer(),
    ]);
    idp = await startOidcProvider({ redirectUri: `${s.publicUrl}/oauth/callback` });
  }, 180_000);
  afterAll(async () => {
    await Promise.all(contexts.map((c) => c.close()));
    await Promise.all([s?.close(), upstream?.close(), idp?.close(), ...hosts.map((h) => h.close())]);
  });

  it("each end user lists the tools their role allows; a revoke in the console ends that user's next call", async () => {
    // globex, an organization of its own: its administrator erin, its tool server, its provider.
    const erin = await createKey(s.env, { org: "globex", owner: "erin", permissions: [...PERMISSIONS] });
    const api = (path: string, method: string, json?: unknown) =>
      fetch(`${s.url}${path}`, {
        method,
        headers: { Authorization: `Bearer ${erin.key}`, "Content-Type": "application/json" },
        ...(json === undefined ? {} : { body: JSON.stringify(json) }),
      });
    const registered = await api("/api/v1/mcp/servers", "POST", {
      name: "docs",
      url: upstream.url,
      description: "The team's documents",
    });
    expect(registered.status).toBe(201);
    const { id } = (await registered.json()) as { id: string };
    for (const [userId, role] of [
      ["carol", "reader"],
      ["dave", "writer"],
    ])
      expect(
        (
          await api("/api/v1/authorization/llm/grant", "POST", {
            resourceType: "mcp_server",
            resourceId: id,
            userId,
            role,
          })
        ).status,
      ).toBe(204);
    // The key the provider's users act through: mcp:call only, for those two users only.
    const through = await createKey(s.env, {
      org: "globex",
      owner: "mcp-sign-in",
      permissions: ["mcp:call"],
      onBehalfOf: { users: ["carol", "dave"] },
    });
    const named = await api("/api/v1/admin/mcp-oauth/identity-provider", "PUT", {
      issuer: idp.issuer,
      client_id: idp.clientId,
      client_secret: idp.clientSecret,
      key_id: through.id,
    });
    expect(named.status, await named.clone().text()).toBe(200);

    // Nothing but the server's URL, as a user pastes it into the host.
    const serverUrl = new URL(`${s.publicUrl}/api/v1/mcp/servers/${id}/mcp`);
    /** A browser of its own (its own cookies at the provider and the gateway), as each person has. */
    async function browserPage() {
      const context = await newContext(s.browser, { width: 1280, height: 800 });
      contexts.push(context);
      // The provider's development pages load a web font; the test machine has no Internet.
      await context.route(/^https:\/\/fonts\.googleapis\.com\//, (route) => route.abort());
      const page = await context.newPage();
      const seen = watch(page);
      page.setDefaultTimeout(20_000);
      return { page, seen };
    }
    const seen: ReturnType<typeof watch>[] = [];

    /** The host connects, the browser signs `user` in at the provider and allows at the gateway; the host's tool names. */
    async function connectAs(user: string, host: DeskHost) {
      hosts.push(host);
      const { page, seen: watched } = await browserPage();
      seen.push(watched);
      const first = new StreamableHTTPClientTransport(serverUrl, { authProvider: host });
      await expect(new Client({ name: "desk", version: "1.0.0" }).connect(first)).rejects.toThrow(
        UnauthorizedError,
      );
      // The SDK found the gateway from the protected-resource metadata and registered there.
      expect(host.client?.client_id).toMatch(/^mcpc_/);
      const [authorization] = host.opened;
      expect(authorization?.origin).toBe(s.publicUrl);
      expect(authorization?.searchParams.get("resource")).toBe(serverUrl.href);

      await page.goto(authorization!.href);
      // The organization's provider, not the gateway's API-key sign-in.
      expect(new URL(page.url()).origin).toBe(idp.issuer);
      await page.getByPlaceholder("Enter any login").fill(user);
      await page.getByPlaceholder("and password").fill("any password");
      await page.getByRole("button", { name: "Sign-in" }).click();
      await page.getByRole("button", { name: "Continue" }).click();

      // Back at the gateway: its consent page names the client, the user, the server and what it may do.
      await page.getByRole("heading", { name: `Allow ${host.name}?` }).waitFor();
      expect(new URL(page.url()).origin).toBe(s.publicUrl);
      const card = (await page.locator(".card").textContent())!.replace(/\s+/g, " ");
      expect(card).toContain(`${host.name} (${host.client!.client_id}) will act as ${user}`);
      expect(card).toContain(`on the MCP server docs (${id}): The team's documents`);
      expect(card).toContain("list and call the tools of this server that your role allows (mcp:call)");
      let code: Promise<string>;
      if (host.scheme) {
        // The browser hands the application's scheme to the system, which has no such application
        // here: the answer's redirect is read on its way to the browser, which then follows it as
        // ever (a consent form whose CSP refused the target would be a console error, checked below).
        let sent!: (code: string) => void;
        code = new Promise((resolve) => (sent = resolve));
        await page.route(`${s.publicUrl}/oauth/authorize`, async (route) => {
          if (route.request().method() !== "POST") return route.continue();
          const response = await route.fetch({ maxRedirects: 0 });
          const location = new URL(response.headers().location ?? "about:blank");
          expect(location.href.startsWith(`${host.scheme}?`)).toBe(true);
          sent(location.searchParams.get("code")!);
          await route.fulfill({ response });
        });
      } else code = host.nextCode();
      await page.getByRole("button", { name: "Allow" }).click();
      await first.finishAuth(await code);
      if (!host.scheme) await page.getByText("You may close this window.").waitFor();

      const client = new Client({ name: "desk", version: "1.0.0" });
      await client.connect(new StreamableHTTPClientTransport(serverUrl, { authProvider: host }));
      const tools = (await client.listTools()).tools.map((t) => t.name).sort();
      return { host, client, tools };
    }

    const carol = await connectAs("carol", await DeskHost.start());
    const dave = await connectAs("dave", await DeskHost.start("Cursor", CURSOR_REDIRECT));
    // A reader's tools for carol; dave's writer role adds the ones that change things.
    expect(dave.host.client).toMatchObject({ redirect_uris: [CURSOR_REDIRECT] });
    expect(carol.tools).toEqual(["lookup", "read_file", "search", "slow"]);
    expect(dave.tools).toEqual(["delete_file", "lookup", "read_file", "search", "send_email", "slow"]);
    const accessTokenOf = (host: DeskHost) => host.saved!.access_token;
    const claims = JSON.parse(Buffer.from(accessTokenOf(carol.host).split(".")[1]!, "base64url").toString());
    expect(claims).toMatchObject({ sub: "carol", key_id: through.id, aud: serverUrl.href });

    // erin revokes carol's authorization in the console.
    const { page, seen: console } = await browserPage();
    seen.push(console);
    await signIn(page, s.url, erin.key);
    await page.goto(`${s.url}/admin/tools`);
    const table = page.getByRole("table", { name: /^MCP clients the organization's users signed in with/ });
    await poll(() => table.getByRole("row").filter({ hasText: "dave" }).count()).toBe(1);
    const row = table.getByRole("row").filter({ hasText: "carol" });
    expect(await row.textContent()).toContain(id);
    await row.getByRole("button", { name: `Revoke ${CLIENT_NAME} for carol` }).click();
    await page.getByRole("button", { name: "Yes, revoke" }).click();
    await poll(() => page.getByText(`${CLIENT_NAME} can no longer act for carol.`).isVisible()).toBe(true);
    expect(await table.getByRole("row").filter({ hasText: "carol" }).count()).toBe(0);

    // carol's token is refused at once (not at its expiry), and her refresh token with it: the SDK must
    // send her to sign in again. dave's authorization is untouched.
    const carolsToken = accessTokenOf(carol.host);
    const refused = await fetch(serverUrl.href.replace(s.publicUrl, s.url), {
      method: "POST",
      headers: {
        Authorization: `Bearer ${carolsToken}`,
        "Content-Type": "application/json",
        Accept: "application/json, text/event-stream",
        "MCP-Protocol-Version": "2025-11-25",
      },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" }),
    });
    expect(refused.status).toBe(401);
    expect(await refused.json()).toMatchObject({
      error: { message: expect.stringMatching(/revoked/) },
      code: "revoked",
    });
    const openedBefore = carol.host.opened.length;
    await expect(carol.client.listTools()).rejects.toThrow(UnauthorizedError);
    expect(carol.host.opened.length).toBe(openedBefore + 1);
    expect((await dave.client.listTools()).tools.map((t) => t.name)).toContain("send_email");

    await Promise.all([carol.client.close(), dave.client.close()]);
    // The provider's pages are another site's; the gateway's own pages and the console raised nothing.
    expect(seen.flatMap((w) => w.errors).filter((e) => !e.startsWith(idp.issuer))).toEqual([]);
    expect(seen.flatMap((w) => w.dialogs)).toEqual([]);
  }, 180_000);

  it("a host that runs in a web page (the MCP Inspector's way) discovers, registers, signs in and lists tools from its own origin; the API answers no other origin", async () => {
    // initech: bob reads its tool server, with a key of his own (mcp:call); no identity provider, so
    // the gateway's own sign-in with an API key.
    const admin = await createKey(s.env, { org: "initech", owner: "alice", permissions: [...PERMISSIONS] });
    const bob = await createKey(s.env, { org: "initech", owner: "bob", permissions: ["mcp:call"] });
    const api = (path: string, json: unknown) =>
      fetch(`${s.url}${path}`, {
        method: "POST",
        headers: { Authorization: `Bearer ${admin.key}`, "Content-Type": "application/json" },
        body: JSON.stringify(json),
      });
    const registered = await api("/api/v1/mcp/servers", { name: "docs", url: upstream.url });
    expect(registered.status).toBe(201);
    const { id } = (await registered.json()) as { id: string };
    const granted = await api("/api/v1/authorization/llm/grant", {
      resourceType: "mcp_server",
      resourceId: id,
      userId: "bob",
      role: "reader",
    });
    expect(granted.status).toBe(204);
    const serverUrl = `${s.publicUrl}/api/v1/mcp/servers/${id}/mcp`;

    // The host's own origin (another port, so another origin than the gateway's).
    const site = createServer((_req, res) => {
      res.setHeader("content-type", "text/html; charset=utf-8");
      res.end("<!doctype html><title>Web MCP host</title>");
    });
    await new Promise<void>((resolve) => site.listen(0, "127.0.0.1", resolve));
    const origin = `http://127.0.0.1:${(site.address() as AddressInfo).port}`;
    const context = await newContext(s.browser, { width: 1280, height: 800 });
    contexts.push(context);
    const page = await context.newPage();
    const seen = watch(page);
    page.setDefaultTimeout(20_000);
    try {
      await page.goto(`${origin}/`);
      // What the SDK's OAuth client does, run by the page: the proxy's 401 names the metadata (a header
      // the page may read only if exposed), then the two metadata documents (asked with
      // MCP-Protocol-Version, which needs a preflight), then registration.
      const found = await page.evaluate(
        async ({ serverUrl, origin }) => {
          const version = { "MCP-Protocol-Version": "2025-11-25" };
          const first = await fetch(serverUrl, {
            method: "POST",
            headers: {
              ...version,
              "Content-Type": "application/json",
              Accept: "application/json, text/event-stream",
            },
            body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" }),
          });
          const challenge = first.headers.get("WWW-Authenticate") ?? "";
          const metadataUrl = /resource_metadata="([^"]+)"/.exec(challenge)?.[1] ?? "";
          const resource = await (await fetch(metadataUrl, { headers: version })).json();
          const issuer = resource.authorization_servers[0];
          const server = await (
            await fetch(`${issuer}/.well-known/oauth-authorization-server`, { headers: version })
          ).json();
          const registration = await fetch(server.registration_endpoint, {
            method: "POST",
            headers: { "Content-Type": "application/json" },
            body: JSON.stringify({
              client_name: "Web MCP host",
              redirect_uris: [`${origin}/callback`],
              token_endpoint_auth_method: "none",
              grant_types: ["authorization_code", "refresh_token"],
              response_types: ["code"],
            }),
          });
          return {
            status: first.status,
            metadataUrl,
            resource: resource.resource,
            server,
            registered: registration.status,
            client: await registration.json(),
          };
        },
        { serverUrl, origin },
      );
      expect(found.status).toBe(401);
      expect(found.metadataUrl).toBe(
        `${s.publicUrl}/.well-known/oauth-protected-resource/api/v1/mcp/servers/${id}/mcp`,
      );
      expect(found.resource).toBe(serverUrl);
      expect(found.registered).toBe(201);
      const clientId = found.client.client_id as string;

      // The user signs in with bob's key and allows, in the same tab; the gateway sends it back to the host.
      const verifier = randomBytes(32).toString("base64url");
      const authorization = new URL(found.server.authorization_endpoint);
      for (const [name, value] of Object.entries({
        response_type: "code",
        client_id: clientId,
        redirect_uri: `${origin}/callback`,
        code_challenge: createHash("sha256").update(verifier).digest("base64url"),
        code_challenge_method: "S256",
        resource: serverUrl,
        state: "web-state",
      }))
        authorization.searchParams.set(name, value);
      await page.goto(authorization.href);
      await page.getByLabel("API key with mcp:call").fill(bob.key);
      await page.getByRole("button", { name: "Sign in" }).click();
      await page.getByRole("button", { name: "Allow" }).click();
      await page.waitForURL(`${origin}/callback?**`);
      const back = new URL(page.url());
      expect(back.searchParams.get("state")).toBe("web-state");

      // Back on its own origin, the page exchanges the code and calls the proxy with the token.
      const called = await page.evaluate(
        async ({ tokenEndpoint, serverUrl, origin, clientId, code, verifier, gateway }) => {
          const token = await fetch(tokenEndpoint, {
            method: "POST",
            headers: { "Content-Type": "application/x-www-form-urlencoded" },
            body: new URLSearchParams({
              grant_type: "authorization_code",
              code,
              redirect_uri: `${origin}/callback`,
              client_id: clientId,
              code_verifier: verifier,
              resource: serverUrl,
            }),
          });
          const tokens = await token.json();
          const listed = await fetch(serverUrl, {
            method: "POST",
            headers: {
              Authorization: `Bearer ${tokens.access_token}`,
              "Content-Type": "application/json",
              Accept: "application/json, text/event-stream",
              "MCP-Protocol-Version": "2025-11-25",
            },
            body: JSON.stringify({ jsonrpc: "2.0", id: 2, method: "tools/list" }),
          });
          const listing = await listed.json();
          // The rest of the API, and the console, answer no other origin: the browser keeps their answers from the page.
          const blocked = async (url: string, init?: RequestInit) =>
            fetch(url, init).then(
              () => "read",
              (err: Error) => err.name,
            );
          return {
            token: token.status,
            listed: listed.status,
            tools: (listing.result.tools as { name: string }[]).map((t) => t.name).sort(),
            whoami: await blocked(`${gateway}/api/v1/authentication/whoami`, {
              headers: { Authorization: `Bearer ${tokens.access_token}` },
            }),
            console: await blocked(`${gateway}/admin/`),
          };
        },
        {
          tokenEndpoint: found.server.token_endpoint as string,
          serverUrl,
          origin,
          clientId,
          code: back.searchParams.get("code")!,
          verifier,
          gateway: s.publicUrl,
        },
      );
      expect(called).toEqual({
        token: 200,
        listed: 200,
        tools: ["lookup", "read_file", "search", "slow"],
        whoami: "TypeError",
        console: "TypeError",
      });
      // The page's console has the proxy's 401 and what the browser says of the two answers it kept
      // from the page (those lines may come a moment later), nothing else.
      const expected = [
        /^Failed to load resource: the server responded with a status of 401 \(Unauthorized\)$/,
        /^Failed to load resource: net::ERR_FAILED$/,
        /^Access to fetch at '[^']+\/(api\/v1\/authentication\/whoami|admin\/)' from origin '[^']+' has been blocked by CORS policy: /,
      ];
      const messages = seen.errors.map((e) => e.slice(e.indexOf(": ") + 2));
      expect(messages.filter((m) => !expected.some((line) => line.test(m)))).toEqual([]);
      expect(messages.filter((m) => expected[0]!.test(m))).toHaveLength(1);
    } finally {
      await new Promise<void>((resolve) => site.close(() => resolve()));
    }
  }, 120_000);
});
