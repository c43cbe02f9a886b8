import { createHash, randomBytes } from "node:crypto";
import { type FakeMcpServer, startFakeMcpServer } from "@gw/test-kit/mcp-upstream";
import { auth, type OAuthClientProvider } from "@modelcontextprotocol/sdk/client/auth.js";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type {
  OAuthClientInformationMixed,
  OAuthClientMetadata,
  OAuthTokens,
} from "@modelcontextprotocol/sdk/shared/auth.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { newOrg } from "../authorization-helpers.ts";
import { TEST_PUBLIC_URL, useGateway } from "../harness.ts";
import { caller, MCP_ENV } from "./mcp-helpers.ts";

const gw = useGateway(MCP_ENV);
let upstream: FakeMcpServer;
beforeAll(async () => {
  upstream = await startFakeMcpServer();
});
afterAll(async () => {
  await upstream?.close();
});

const REDIRECT = "http://127.0.0.1:47123/callback";

/** The client's network: the gateway's public URL (https://gateway.test) is the test gateway. */
const clientFetch = (input: string | URL | Request, init?: RequestInit) => {
  const url = input instanceof Request ? input.url : String(input);
  const local = url.startsWith(TEST_PUBLIC_URL) ? `${gw.url}${url.slice(TEST_PUBLIC_URL.length)}` : url;
  return input instanceof Request ? fetch(new Request(local, input), init) : fetch(local, init);
};

/** An in-memory OAuth client as an MCP host keeps one: what it registered, its tokens, its PKCE verifier. */
class MemoryProvider implements OAuthClientProvider {
  client: OAuthClientInformationMixed | undefined;
  saved: OAuthTokens | undefined;
  verifier = "";
  authorizationUrl: URL | undefined;
  get redirectUrl() {
    return REDIRECT;
  }
  get clientMetadata(): OAuthClientMetadata {
    return {
      client_name: "Test MCP host",
      redirect_uris: [REDIRECT],
      grant_types: ["authorization_code", "refresh_token"],
      response_types: ["code"],
      token_endpoint_auth_method: "none",
    };
  }
  clientInformation() {
    return this.client;
  }
  saveClientInformation(info: OAuthClientInformationMixed) {
    this.client = info;
  }
  tokens() {
    return this.saved;
  }
  saveTokens(tokens: OAuthTokens) {
    this.saved = tokens;
  }
  redirectToAuthorization(url: URL) {
    this.authorizationUrl = url;
  }
  saveCodeVerifier(verifier: string) {
    this.verifier = verifier;
  }
  codeVerifier() {
    return this.verifier;
  }
}

const hidden = (html: string, name: string) =>
  new RegExp(`name="${name}" value="([^"]+)"`).exec(html)?.[1]?.replaceAll("&amp;", "&");

/** What the browser does: opens the authorization URL, signs in with the key, answers the consent page. */
async function browser(authorizationUrl: URL, key: string, decision: "allow" | "deny" = "allow") {
  const page = await clientFetch(authorizationUrl);
  expect(page.status).toBe(200);
  const request = hidden(await page.text(), "request")!;
  const signedIn = await clientFetch(`${TEST_PUBLIC_URL}/oauth/authorize`, {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded" },
    body: new URLSearchParams({ request, step: "sign-in", key }),
  });
  const consentHtml = await signedIn.text();
  expect(signedIn.status, consentHtml).toBe(200);
  const cookie = signedIn.headers
    .getSetCookie()
    .map((c) => c.split(";")[0])
    .join("; ");
  const answered = await clientFetch(`${TEST_PUBLIC_URL}/oauth/authorize`, {
    method: "POST",
    redirect: "manual",
    headers: { "content-type": "application/x-www-form-urlencoded", cookie },
    body: new URLSearchParams({
      request,
      step: "consent",
      consent: hidden(consentHtml, "consent")!,
      decision,
    }),
  });
  expect(answered.status).toBe(302);
  return { consentHtml, location: new URL(answered.headers.get("location")!) };
}

/** An organization where alice registered the fake upstream, bob is its reader, and bob has his own key. */
async function setUp() {
  const o = await newOrg(gw);
  const res = await caller(gw.url, o.secret)("alice", "/api/v1/mcp/servers", {
    json: { name: "docs", url: upstream.url, description: "The document store" },
  });
  expect(res.status).toBe(201);
  const { id } = (await res.json()) as { id: string };
  expect(
    (await o.grant("alice", { resourceType: "mcp_server", resourceId: id, userId: "bob", role: "reader" }))
      .status,
  ).toBe(204);
  const bob = await gw.createKey({ org: o.org, owner: "bob" });
  const serverUrl = new URL(`${TEST_PUBLIC_URL}/api/v1/mcp/servers/${id}/mcp`);
  return { o, id, bob, serverUrl };
}

const connect = async (serverUrl: URL, provider: MemoryProvider) => {
  const transport = new StreamableHTTPClientTransport(serverUrl, {
    authProvider: provider,
    fetch: clientFetch,
  });
  const client = new Client({ name: "oauth-test", version: "1.0.0" });
  await client.connect(transport);
  return { client, transport };
};

/** The whole flow with the SDK: discovery, registration, the browser, the code exchange. */
async function authorize(serverUrl: URL, key: string) {
  const provider = new MemoryProvider();
  const first = new StreamableHTTPClientTransport(serverUrl, { authProvider: provider, fetch: clientFetch });
  await expect(new Client({ name: "oauth-test", version: "1.0.0" }).connect(first)).rejects.toThrow(
    /Unauthorized/,
  );
  expect(provider.authorizationUrl).toBeDefined();
  const { location, consentHtml } = await browser(provider.authorizationUrl!, key);
  expect(location.origin + location.pathname).toBe(REDIRECT);
  const code = location.searchParams.get("code")!;
  await first.finishAuth(code);
  return { provider, consentHtml, location };
}

describe("MCP clients sign in with OAuth (the TypeScript SDK's client)", () => {
  it("discovers the gateway, registers, signs the user in with an API key, shows consent, and lists only the tools the user's role allows", async () => {
    const { id, bob, serverUrl } = await setUp();
    const { provider, consentHtml, location } = await authorize(serverUrl, bob.secret);
    expect(consentHtml).toContain("Test MCP host");
    expect(consentHtml).toContain(`docs (${id})`);
    expect(consentHtml).toContain("mcp:call");
    expect(location.searchParams.get("iss")).toBe(TEST_PUBLIC_URL);
    expect(provider.saved).toMatchObject({ token_type: "Bearer", expires_in: 900, scope: "mcp:call" });
    const claims = JSON.parse(
      Buffer.from(provider.saved!.access_token.split(".")[1]!, "base64url").toString(),
    );
    expect(claims).toMatchObject({
      aud: serverUrl.href,
      sub: "bob",
      org: bob.record.org,
      permissions: ["mcp:call"],
    });

    const { client } = await connect(serverUrl, provider);
    const names = (await client.listTools()).tools.map((t) => t.name).sort();
    expect(names).toEqual(["lookup", "read_file", "search", "slow"]);
    await client.close();
  });

  it("publishes RFC 8414 metadata and complete OpenID discovery, and the protected resource names the gateway", async () => {
    const as = await (await gw.call("/.well-known/oauth-authorization-server")).json();
    expect(as).toMatchObject({
      issuer: TEST_PUBLIC_URL,
      authorization_endpoint: `${TEST_PUBLIC_URL}/oauth/authorize`,
      token_endpoint: `${TEST_PUBLIC_URL}/oauth/token`,
      registration_endpoint: `${TEST_PUBLIC_URL}/oauth/register`,
      response_types_supported: ["code"],
      code_challenge_methods_supported: ["S256"],
      token_endpoint_auth_methods_supported: ["none"],
      client_id_metadata_document_supported: true,
    });
    const oidc = await (await gw.call("/.well-known/openid-configuration")).json();
    expect(oidc).toMatchObject({
      ...as,
      jwks_uri: `${TEST_PUBLIC_URL}/.well-known/jwks.json`,
      subject_types_supported: ["public"],
    });
    const prm = await (
      await gw.call(
        "/.well-known/oauth-protected-resource/api/v1/mcp/servers/mcp_000000000000000000000000/mcp",
      )
    ).json();
    expect(prm.authorization_servers).toEqual([TEST_PUBLIC_URL]);
  });
});
