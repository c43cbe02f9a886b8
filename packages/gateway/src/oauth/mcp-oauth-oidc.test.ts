import { createHash, randomBytes } from "node:crypto";
import { UpstreamPolicy } from "@gw/core/mcp";
import { createPostgres } from "@gw/core/postgres";
import { type FakeMcpServer, startFakeMcpServer } from "@gw/test-kit/mcp-upstream";
import { startOidcProvider, type TestOidcProvider } from "@gw/test-kit/oidc-provider";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { TEST_PUBLIC_URL, useGateway } from "../../test/harness.ts";
import { MCP_ENV } from "../../test/mcp/mcp-helpers.ts";
import { clientFetchTo, docsServer, hidden, MemoryProvider } from "../../test/mcp/oauth-client.ts";
import { OidcRelyingParty } from "./oidc.ts";

const gw = useGateway({ ...MCP_ENV, MCP_OAUTH_ALLOW_PRIVATE_IDENTITY_PROVIDERS: "true" });
const CALLBACK = `${TEST_PUBLIC_URL}/oauth/callback`;
let upstream: FakeMcpServer;
let idp: TestOidcProvider;
beforeAll(async () => {
  upstream = await startFakeMcpServer();
  idp = await startOidcProvider({ redirectUri: CALLBACK });
});
afterAll(async () => {
  await upstream?.close();
  await idp?.close();
});

const REDIRECT = "http://127.0.0.1:47124/callback";

const clientFetch = clientFetchTo(() => gw.url);

const htmlDecode = (s: string) =>
  s
    .replaceAll("&#x2F;", "/")
    .replaceAll("&#x3A;", ":")
    .replaceAll("&#39;", "'")
    .replaceAll("&quot;", '"')
    .replaceAll("&amp;", "&");

/**
 * A browser: follows redirects by hand (the gateway's public host is the test gateway), keeps each
 * host's cookies, and answers the provider's login and consent forms (its development interactions)
 * until a page that is neither, or a redirect to the MCP client, is reached.
 */
class Browser {
  private readonly jar = new Map<string, Map<string, string>>();
  private readonly login: string;
  constructor(login: string) {
    this.login = login;
  }

  private cookies(url: URL) {
    return [...(this.jar.get(url.host) ?? new Map()).entries()].map(([k, v]) => `${k}=${v}`).join("; ");
  }

  private keep(url: URL, res: Response) {
    const jar = this.jar.get(url.host) ?? new Map<string, string>();
    for (const c of res.headers.getSetCookie()) {
      const [pair] = c.split(";");
      const at = pair!.indexOf("=");
      const name = pair!.slice(0, at);
      const value = pair!.slice(at + 1);
      if (value === "" || /expires=Thu, 01 Jan 1970/i.test(c)) jar.delete(name);
      else jar.set(name, value);
    }
    this.jar.set(url.host, jar);
  }

  forget(host: string, name: string) {
    this.jar.get(host)?.delete(name);
  }

  /** One request, its cookies kept; no redirect followed. */
  async request(target: string, form?: Record<string, string>) {
    const url = new URL(target);
    const res = await clientFetch(url, {
      method: form ? "POST" : "GET",
      redirect: "manual",
      headers: {
        cookie: this.cookies(url),
        ...(form ? { "content-type": "application/x-www-form-urlencoded" } : {}),
      },
      ...(form ? { body: new URLSearchParams(form) } : {}),
    });
    this.keep(url, res);
    return { url, res };
  }

  /** Navigates until a page that is not the provider's, or the redirect back to the MCP client. */
  async visit(
    target: string,
    form?: Record<string, string>,
  ): Promise<{ url: URL; res: Response; html: string }> {
    let next: { url: URL; res: Response } = await this.request(target, form);
    for (let hops = 0; hops < 20; hops++) {
      const { url, res } = next;
      const location = res.headers.get("location");
      if (res.status >= 300 && res.status < 400 && location) {
        const to = new URL(location, url);
        if (to.href.startsWith(REDIRECT)) return { url: to, res, html: "" };
        next = await this.request(to.href);
        continue;
      }
      const html = await res.text();
      const prompt = hidden(html, "prompt");
      const action = /<form[^>]*action="([^"]+)"/.exec(html)?.[1];
      if (url.origin === idp.issuer && prompt && action) {
        const submit = new URL(htmlDecode(action), url).href;
        next = await this.request(
          submit,
          prompt === "login" ? { prompt, login: this.login, password: "any" } : { prompt },
        );
        continue;
      }
      return { url, res, html };
    }
    throw new Error("too many redirects");
  }
}

/** An organization with the fake upstream (alice its owner), carol a reader, and the provider named. */
async function setUp() {
  const { o, id } = await docsServer(gw, upstream.url, "carol");
  const admin = await gw.createKey({ org: o.org, owner: "admin", permissions: ["admin:api-keys"] });
  const put = await gw.call("/api/v1/admin/mcp-oauth/identity-provider", {
    method: "PUT",
    bearer: admin.secret,
    json: { issuer: idp.issuer, client_id: idp.clientId, client_secret: idp.clientSecret, key_id: o.keyId },
  });
  const putText = await put.text();
  expect(put.status, putText).toBe(200);
  const serverUrl = new URL(`${TEST_PUBLIC_URL}/api/v1/mcp/servers/${id}/mcp`);
  return { o, id, serverUrl, putText, admin: admin.secret };
}

/** The SDK's first connection: refused, and the authorization URL it would open in the browser. */
async function begin(serverUrl: URL, provider = new MemoryProvider(REDIRECT)) {
  const first = new StreamableHTTPClientTransport(serverUrl, { authProvider: provider, fetch: clientFetch });
  await expect(new Client({ name: "oidc-test", version: "1.0.0" }).connect(first)).rejects.toThrow(
    /Unauthorized/,
  );
  expect(provider.authorizationUrl).toBeDefined();
  return { provider, first, authorizationUrl: provider.authorizationUrl! };
}

describe("an organization's OpenID provider signs its end users in", () => {
  it("the SDK's client is sent to the provider, the user signs in there and consents at the gateway, and lists only the tools their role allows as that user", async () => {
    const { o, id, serverUrl } = await setUp();
    const { provider, first, authorizationUrl } = await begin(serverUrl);
    const browser = new Browser("carol");

    // The gateway does not ask for a key: it sends the browser to the organization's provider.
    const sent = await browser.request(authorizationUrl.href);
    expect(sent.res.status).toBe(302);
    const atProvider = new URL(sent.res.headers.get("location")!);
    expect(atProvider.origin).toBe(idp.issuer);
    expect(atProvider.searchParams.get("client_id")).toBe(idp.clientId);
    expect(atProvider.searchParams.get("redirect_uri")).toBe(CALLBACK);
    expect(atProvider.searchParams.get("code_challenge_method")).toBe("S256");
    expect(atProvider.searchParams.get("nonce")).toMatch(/^[A-Za-z0-9_-]{43}$/);

    const consent = await browser.visit(atProvider.href);
    expect(consent.url.href.startsWith(CALLBACK), consent.html).toBe(true);
    expect(consent.res.status, consent.html).toBe(200);
    expect(consent.html).toContain("<strong>carol</strong>");
    expect(consent.html).toContain(`docs (${id})`);

    const back = await browser.visit(`${TEST_PUBLIC_URL}/oauth/authorize`, {
      request: hidden(consent.html, "request")!,
      step: "consent",
      consent: hidden(consent.html, "consent")!,
      decision: "allow",
    });
    expect(back.url.origin + back.url.pathname).toBe(REDIRECT);
    await first.finishAuth(back.url.searchParams.get("code")!);

    const claims = JSON.parse(
      Buffer.from(provider.saved!.access_token.split(".")[1]!, "base64url").toString(),
    );
    // The provider's subject is the end user, acting through the organization's key.
    expect(claims).toMatchObject({ sub: "carol", org: o.org, key_id: o.keyId, aud: serverUrl.href });

    const transport = new StreamableHTTPClientTransport(serverUrl, {
      authProvider: provider,
      fetch: clientFetch,
    });
    const client = new Client({ name: "oidc-test", version: "1.0.0" });
    await client.connect(transport);
    // A reader's tools; the writer's (delete_file, send_email) are not carol's.
    expect((await client.listTools()).tools.map((t) => t.name).sort()).toEqual([
      "lookup",
      "read_file",
      "search",
      "slow",
    ]);
    await client.close();
  });

  it("refuses a callback without the browser's cookie, a user the server does not know, and a key sign-in for a request sent to the provider", async () => {
    const { o, id, serverUrl } = await setUp();

    // Login CSRF: the callback comes back to a browser that did not begin the sign-in.
    const { authorizationUrl } = await begin(serverUrl);
    const stranger = new Browser("carol");
    const sent = await stranger.request(authorizationUrl.href);
    stranger.forget(new URL(TEST_PUBLIC_URL).host, "gw_oauth_oidc");
    const landed = await stranger.visit(sent.res.headers.get("location")!);
    expect(landed.res.status).toBe(403);
    expect(JSON.parse(landed.html)).toMatchObject({ error: "access_denied" });

    // dave signs in at the provider but is no reader of the server: back to the client, access_denied.
    const second = await begin(serverUrl);
    const dave = new Browser("dave");
    const refused = await dave.visit(second.authorizationUrl.href);
    expect(refused.url.origin + refused.url.pathname).toBe(REDIRECT);
    expect(refused.url.searchParams.get("error")).toBe("access_denied");
    expect(refused.url.searchParams.get("error_description")).toMatch(/dave may not use this MCP server/);
    expect(refused.url.searchParams.get("code")).toBeNull();

    // A provider's user named like the owner of a key of the organization does not become that owner:
    // the organization's key may act for them only if its policy names them (as X-On-Behalf-Of),
    // even with a role on the server.
    expect(
      (
        await o.grant("alice", {
          resourceType: "mcp_server",
          resourceId: id,
          userId: "admin",
          role: "reader",
        })
      ).status,
    ).toBe(204);
    const asAdmin = await new Browser("admin").visit((await begin(serverUrl)).authorizationUrl.href);
    expect(asAdmin.url.searchParams.get("error")).toBe("access_denied");
    expect(asAdmin.url.searchParams.get("error_description")).toMatch(
      /The signed-in user 'admin' owns an API key of this organization/,
    );

    // The development sign-in is not a way around the organization's provider.
    const third = await begin(serverUrl);
    const keyUser = new Browser("carol");
    const toProvider = await keyUser.request(third.authorizationUrl.href);
    const request = new URL(toProvider.res.headers.get("location")!).searchParams.get("state")!;
    const bob = await gw.createKey({ owner: "bob" });
    const keyed = await keyUser.request(`${TEST_PUBLIC_URL}/oauth/authorize`, {
      request,
      step: "sign-in",
      key: bob.secret,
    });
    expect(keyed.res.status).toBe(400);
  });
});

describe("the organization's provider, as an administrator names it", () => {
  it("stores the secret sealed, shows only its last 4 characters, audits the change, and refuses an unreachable issuer or another organization's key", async () => {
    const { o, putText, admin } = await setUp();
    const shown = JSON.parse(putText);
    expect(shown).toEqual({
      object: "mcp_oauth.identity_provider",
      issuer: idp.issuer,
      client_id: idp.clientId,
      client_secret_last4: idp.clientSecret.slice(-4),
      key_id: o.keyId,
      created_at: expect.any(Number),
      updated_at: expect.any(Number),
    });
    const got = await gw.call("/api/v1/admin/mcp-oauth/identity-provider", { bearer: admin });
    expect(await got.json()).toEqual(shown);
    expect(JSON.stringify(shown)).not.toContain(idp.clientSecret);
    const db = createPostgres(gw.database.url, { connectionName: "oidc-provider-test" });
    const { rows } = await db
      .query<{ sealed: Buffer }>("SELECT sealed FROM oauth_identity_providers WHERE org = $1", [o.org])
      .finally(() => db.close());
    expect(rows).toHaveLength(1);
    expect(rows[0]!.sealed.toString("latin1")).not.toContain(idp.clientSecret);

    const audit = await gw.call("/api/v1/admin/audit?resourceType=identity_provider&action=store", {
      bearer: admin,
    });
    const auditText = await audit.text();
    expect(audit.status, auditText).toBe(200);
    expect(JSON.parse(auditText).data).toEqual([
      expect.objectContaining({ action: "store", resourceType: "identity_provider", resourceId: idp.issuer }),
    ]);

    const unreachable = await gw.call("/api/v1/admin/mcp-oauth/identity-provider", {
      method: "PUT",
      bearer: admin,
      json: { issuer: "http://127.0.0.1:9", client_id: "x", client_secret: "secret-xyz", key_id: o.keyId },
    });
    expect(unreachable.status).toBe(422);
    const unreachableText = await unreachable.text();
    expect(unreachableText).toContain("issuer");
    expect(unreachableText).not.toContain("secret-xyz");
    const other = await gw.createKey({ owner: "eve" });
    const foreign = await gw.call("/api/v1/admin/mcp-oauth/identity-provider", {
      method: "PUT",
      bearer: admin,
      json: { issuer: idp.issuer, client_id: idp.clientId, client_secret: "s3cret", key_id: other.record.id },
    });
    expect(foreign.status).toBe(422);

    const removed = await gw.call("/api/v1/admin/mcp-oauth/identity-provider", {
      method: "DELETE",
      bearer: admin,
    });
    expect(removed.status).toBe(204);
    expect((await gw.call("/api/v1/admin/mcp-oauth/identity-provider", { bearer: admin })).status).toBe(404);
  });
});

describe("the ID token the provider's callback brings", () => {
  const relyingParty = () =>
    new OidcRelyingParty({
      policy: new UpstreamPolicy({ allowPrivate: true, allowPrivateSetting: "TEST" }),
      timeoutMs: 2_000,
    });
  const client = () => ({ issuer: idp.issuer, clientId: idp.clientId, clientSecret: idp.clientSecret });

  it("is the provider's, for this client and this sign-in: another audience, nonce, issuer or key is refused", async () => {
    const rp = relyingParty();
    const nonce = randomBytes(16).toString("base64url");
    expect(await rp.verify(client(), idp.signIdToken({ sub: "carol", nonce }), nonce)).toBe("carol");
    await expect(
      rp.verify(client(), idp.signIdToken({ sub: "carol", nonce, aud: "another-client" }), nonce),
    ).rejects.toThrow(/'aud' claim/);
    await expect(
      rp.verify(client(), idp.signIdToken({ sub: "carol", nonce: "another-sign-in" }), nonce),
    ).rejects.toThrow(/'nonce' claim/);
    await expect(
      rp.verify(client(), idp.signIdToken({ sub: "carol", nonce, iss: "http://127.0.0.1:1" }), nonce),
    ).rejects.toThrow(/'iss' claim/);
    const [header, payload] = idp.signIdToken({ sub: "carol", nonce }).split(".");
    const forged = `${header}.${payload}.${createHash("sha256").update("x").digest("base64url")}`;
    await expect(rp.verify(client(), forged, nonce)).rejects.toThrow(/not signed by the provider/);
    await expect(rp.verify(client(), idp.signIdToken({ sub: "caröl", nonce }), nonce)).rejects.toThrow(
      /not a user id/,
    );
  });
});
