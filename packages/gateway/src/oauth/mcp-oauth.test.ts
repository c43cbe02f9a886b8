import { createHash, randomBytes } from "node:crypto";
import { createLogger } from "@gw/core/logger";
import { createPostgres } from "@gw/core/postgres";
import { type HttpsDocuments, startHttpsDocuments } from "@gw/test-kit/https-documents";
import { useFakeMcpServer } from "@gw/test-kit/mcp-upstream";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { newOrg } from "../../test/authorization-helpers.ts";
import { TEST_PUBLIC_URL, useGateway } from "../../test/harness.ts";
import { caller, MCP_ENV, startReplica } from "../../test/mcp/mcp-helpers.ts";
import { clientFetchTo, docsServer, hidden, MemoryProvider } from "../../test/mcp/oauth-client.ts";
import type { RunningGateway } from "../server.ts";

const gw = useGateway(MCP_ENV);
const upstream = useFakeMcpServer();

const REDIRECT = "http://127.0.0.1:47123/callback";
/** Which gateway process the client's requests reach (one replica of the test file's gateway, or another). */
let gatewayUrl = () => gw.url;

const clientFetch = clientFetchTo(() => gatewayUrl());

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
  return {
    consentHtml,
    consentCsp: signedIn.headers.get("content-security-policy"),
    location: new URL(answered.headers.get("location")!),
  };
}

/** An organization where alice registered the fake upstream, bob is its reader, and bob has his own key. */
async function setUp() {
  const { o, id } = await docsServer(gw, upstream.url, "bob");
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
async function authorize(serverUrl: URL, key: string, provider = new MemoryProvider(REDIRECT)) {
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

/** One sample of a gateway process's /metrics (0 when absent). */
async function sample(metricsUrl: string, series: string): Promise<number> {
  const text = await (await fetch(metricsUrl)).text();
  const line = text.split("\n").find((l) => l.startsWith(`${series} `));
  return line ? Number(line.slice(series.length + 1)) : 0;
}

/** A client registered by hand (RFC 7591), as older hosts do. */
async function register(redirectUris: string[] = [REDIRECT]) {
  const res = await gw.call("/oauth/register", {
    method: "POST",
    json: { client_name: "Hand-made client", redirect_uris: redirectUris },
  });
  expect(res.status).toBe(201);
  return ((await res.json()) as { client_id: string }).client_id;
}

const pkce = () => {
  const verifier = randomBytes(32).toString("base64url");
  return { verifier, challenge: createHash("sha256").update(verifier).digest("base64url") };
};

const authorizationUrl = (params: Record<string, string | undefined>) => {
  const url = new URL(`${TEST_PUBLIC_URL}/oauth/authorize`);
  for (const [k, v] of Object.entries(params)) if (v !== undefined) url.searchParams.set(k, v);
  return url;
};

/** An authorization request of `clientId` as the SDKs make it (code, S256 with a fresh challenge, REDIRECT), with `params` over it. */
const codeRequestUrl = (clientId: string, params: Record<string, string | undefined>) =>
  authorizationUrl({
    response_type: "code",
    client_id: clientId,
    redirect_uri: REDIRECT,
    code_challenge: pkce().challenge,
    code_challenge_method: "S256",
    ...params,
  });

const tokenRequest = (params: Record<string, string>) =>
  gw.call("/oauth/token", {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded" },
    body: new URLSearchParams(params),
  });

/** Registration, the browser's consent and the code, by hand: what a test then exchanges as it likes. */
async function codeFor(serverUrl: URL, key: string) {
  const clientId = await register();
  const { verifier, challenge } = pkce();
  const { location } = await browser(
    authorizationUrl({
      response_type: "code",
      client_id: clientId,
      redirect_uri: REDIRECT,
      code_challenge: challenge,
      code_challenge_method: "S256",
      resource: serverUrl.href,
      state: "s1",
    }),
    key,
  );
  expect(location.searchParams.get("state")).toBe("s1");
  return { clientId, verifier, code: location.searchParams.get("code")! };
}

const exchange = (
  c: { clientId: string; verifier: string; code: string },
  extra: Record<string, string> = {},
) =>
  tokenRequest({
    grant_type: "authorization_code",
    client_id: c.clientId,
    code: c.code,
    code_verifier: c.verifier,
    redirect_uri: REDIRECT,
    ...extra,
  });

const listTools = (serverUrl: URL, token: string) =>
  clientFetch(serverUrl, {
    method: "POST",
    headers: {
      authorization: `Bearer ${token}`,
      "content-type": "application/json",
      accept: "application/json, text/event-stream",
      "mcp-protocol-version": "2025-11-25",
    },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" }),
  });

describe("the authorization server refuses what it must", () => {
  it("PKCE: a wrong code_verifier is invalid_grant (and the code is spent), plain and a missing challenge go back as invalid_request", async () => {
    const { serverUrl, bob } = await setUp();
    const c = await codeFor(serverUrl, bob.secret);
    const wrong = await exchange({ ...c, verifier: pkce().verifier });
    expect(wrong.status).toBe(400);
    expect(await wrong.json()).toEqual({
      error: "invalid_grant",
      error_description: expect.stringMatching(/code_verifier/),
    });
    // The code was redeemed by that attempt: the right verifier now finds nothing.
    expect(await (await exchange(c)).json()).toMatchObject({ error: "invalid_grant" });

    const clientId = await register();
    for (const [params, says] of [
      [
        { code_challenge: pkce().challenge, code_challenge_method: "plain" },
        /must be S256 \(plain is refused\)/,
      ],
      // A plain challenge is the verifier itself, which may be longer: still the method's refusal.
      [{ code_challenge: `${pkce().verifier}abc`, code_challenge_method: "plain" }, /must be S256/],
      [{ code_challenge: pkce().challenge }, /must be S256/],
      [{ code_challenge: "short", code_challenge_method: "S256" }, /43 base64url characters/],
      [{}, /PKCE is required/],
    ] as const) {
      const res = await clientFetch(
        authorizationUrl({
          response_type: "code",
          client_id: clientId,
          redirect_uri: REDIRECT,
          resource: serverUrl.href,
          state: "x",
          ...params,
        }),
        { redirect: "manual" },
      );
      expect(res.status).toBe(302);
      const back = new URL(res.headers.get("location")!);
      expect([
        back.origin + back.pathname,
        back.searchParams.get("error"),
        back.searchParams.get("state"),
      ]).toEqual([REDIRECT, "invalid_request", "x"]);
      expect(back.searchParams.get("error_description")).toMatch(says);
    }
  });

  it("scope: mcp:call; openid and offline_access, which some clients always add, are taken and ignored; any other is invalid_scope", async () => {
    const { serverUrl, bob } = await setUp();
    const clientId = await register();
    const asked = (scope: string) =>
      clientFetch(codeRequestUrl(clientId, { resource: serverUrl.href, scope }), { redirect: "manual" });
    for (const scope of ["openid mcp:call", "mcp:call offline_access", "openid offline_access"]) {
      const res = await asked(scope);
      expect(res.status, scope).toBe(200); // the sign-in page
    }
    for (const scope of ["mcp:call admin", "profile"]) {
      const res = await asked(scope);
      expect(res.status, scope).toBe(302);
      expect(new URL(res.headers.get("location")!).searchParams.get("error"), scope).toBe("invalid_scope");
    }
    // The tokens' scope is mcp:call, whatever else was asked.
    const c = await codeFor(serverUrl, bob.secret);
    expect(await (await exchange(c)).json()).toMatchObject({ scope: "mcp:call" });
  });

  it("resource: not an MCP server URL of this gateway is invalid_target; a token for one server is refused by another server's proxy and by the API", async () => {
    const { o, serverUrl, bob } = await setUp();
    const clientId = await register();
    for (const resource of [
      "https://elsewhere.example/mcp",
      `${TEST_PUBLIC_URL}/api/v1/llm/responses`,
      undefined,
    ]) {
      const res = await clientFetch(codeRequestUrl(clientId, { resource }), { redirect: "manual" });
      expect(new URL(res.headers.get("location")!).searchParams.get("error")).toBe("invalid_target");
    }

    const c = await codeFor(serverUrl, bob.secret);
    const tokens = (await (await exchange(c)).json()) as { access_token: string; refresh_token: string };
    expect((await listTools(serverUrl, tokens.access_token)).status).toBe(200);
    // A second server of the same organization that bob may read too: the token is not addressed to it.
    const other = await caller(gw.url, o.secret)("alice", "/api/v1/mcp/servers", {
      json: { name: "other", url: upstream.url },
    });
    const otherId = ((await other.json()) as { id: string }).id;
    await o.grant("alice", {
      resourceType: "mcp_server",
      resourceId: otherId,
      userId: "bob",
      role: "reader",
    });
    const otherUrl = new URL(`${TEST_PUBLIC_URL}/api/v1/mcp/servers/${otherId}/mcp`);
    const refused = await listTools(otherUrl, tokens.access_token);
    expect(refused.status).toBe(401);
    expect(refused.headers.get("www-authenticate")).toMatch(/invalid_token/);
    expect((await gw.call("/api/v1/authentication/whoami", { bearer: tokens.access_token })).status).toBe(
      401,
    );
    // The exchange may name the resource again, only the one the user authorized.
    const fresh = await codeFor(serverUrl, bob.secret);
    const mismatch = await exchange(fresh, { resource: otherUrl.href });
    expect(mismatch.status).toBe(400);
    expect(await mismatch.json()).toMatchObject({ error: "invalid_target" });
    // So may a refresh: another resource is invalid_target too, and does not spend the refresh token.
    const refresh = (resource: string) =>
      tokenRequest({
        grant_type: "refresh_token",
        client_id: c.clientId,
        refresh_token: tokens.refresh_token,
        resource,
      });
    const elsewhere = await refresh(otherUrl.href);
    expect(elsewhere.status).toBe(400);
    expect(await elsewhere.json()).toMatchObject({ error: "invalid_target" });
    expect((await refresh(serverUrl.href)).status).toBe(200);
  });

  it("a resource of another organization, or a server the user may not read, ends at the sign-in page", async () => {
    const { serverUrl } = await setUp();
    const stranger = await gw.createKey();
    const clientId = await register();
    const page = await clientFetch(codeRequestUrl(clientId, { resource: serverUrl.href }));
    const request = hidden(await page.text(), "request")!;
    const signIn = await clientFetch(`${TEST_PUBLIC_URL}/oauth/authorize`, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams({ request, step: "sign-in", key: stranger.secret }),
    });
    const html = await signIn.text();
    expect(html).toContain("may not use this MCP server");
    expect(html).not.toContain('name="consent"');
  });

  it("refresh tokens rotate; a used one presented again revokes the whole family", async () => {
    const { serverUrl, bob } = await setUp();
    const c = await codeFor(serverUrl, bob.secret);
    const first = (await (await exchange(c)).json()) as { refresh_token: string };
    const refresh = (token: string) =>
      tokenRequest({ grant_type: "refresh_token", client_id: c.clientId, refresh_token: token });
    const secondRes = await refresh(first.refresh_token);
    expect(secondRes.status).toBe(200);
    const second = (await secondRes.json()) as { access_token: string; refresh_token: string };
    expect(second.refresh_token).not.toBe(first.refresh_token);
    expect((await listTools(serverUrl, second.access_token)).status).toBe(200);

    const reused = await refresh(first.refresh_token);
    expect(reused.status).toBe(400);
    expect(await reused.json()).toMatchObject({
      error: "invalid_grant",
      error_description: expect.stringMatching(/already used/),
    });
    // The thief's replay revoked the legitimate successor too.
    expect(await (await refresh(second.refresh_token)).json()).toMatchObject({ error: "invalid_grant" });
  });

  it("one refresh token used twice at the same moment: one rotation wins, the other is a reuse that revokes the family", async () => {
    const { serverUrl, bob } = await setUp();
    const c = await codeFor(serverUrl, bob.secret);
    const first = (await (await exchange(c)).json()) as { refresh_token: string };
    const tokenHash = createHash("sha256").update(first.refresh_token).digest("base64url");
    const db = createPostgres(gw.database.url, { connectionName: "oauth-race-test" });
    try {
      // The token's row is held, so both requests reach the statement that decides before either can pass it.
      let release!: () => void;
      const released = new Promise<void>((resolve) => {
        release = resolve;
      });
      let locked!: () => void;
      const lockTaken = new Promise<void>((resolve) => {
        locked = resolve;
      });
      const holding = db.transaction(async (tx) => {
        await tx.query("SELECT 1 FROM oauth_refresh_tokens WHERE token_hash = $1 FOR UPDATE", [tokenHash]);
        locked();
        await released;
      });
      await lockTaken;
      const refresh = (token: string) =>
        tokenRequest({ grant_type: "refresh_token", client_id: c.clientId, refresh_token: token });
      const both = [refresh(first.refresh_token), refresh(first.refresh_token)];
      const waiting = async () =>
        Number(
          (
            await db.query<{ n: string }>(
              `SELECT count(*) AS n FROM pg_stat_activity
                WHERE wait_event_type = 'Lock' AND query LIKE 'UPDATE oauth_refresh_tokens SET used_at%'`,
            )
          ).rows[0]!.n,
        );
      while ((await waiting()) < 2) await new Promise((r) => setTimeout(r, 10));
      release();
      await holding;
      const answers = await Promise.all(
        both.map(async (pending) => {
          const r = await pending;
          return { status: r.status, body: await r.json() };
        }),
      );
      const statuses = answers.map((a) => a.status).sort();
      expect(statuses).toEqual([200, 400]);
      const winner = answers.find((a) => a.status === 200)!.body as { refresh_token: string };
      expect(await (await refresh(winner.refresh_token)).json()).toMatchObject({ error: "invalid_grant" });
    } finally {
      await db.close();
    }
  });

  it("an administrator's revoke ends the user's refresh tokens, and their access tokens at the next call on every replica", async () => {
    const { o, serverUrl, bob } = await setUp();
    const c = await codeFor(serverUrl, bob.secret);
    const tokens = (await (await exchange(c)).json()) as { access_token: string; refresh_token: string };
    const claims = JSON.parse(Buffer.from(tokens.access_token.split(".")[1]!, "base64url").toString());
    expect(claims.sid).toEqual(expect.any(String));
    const replica = await startReplica(gw);
    try {
      const onReplica = () => {
        gatewayUrl = () => replica.url;
        return listTools(serverUrl, tokens.access_token).finally(() => {
          gatewayUrl = () => gw.url;
        });
      };
      // Both replicas have accepted (and cached the verified claims of) the token before the revoke.
      expect((await listTools(serverUrl, tokens.access_token)).status).toBe(200);
      expect((await onReplica()).status).toBe(200);

      const admin = await gw.createKey({ org: o.org, owner: "admin", permissions: ["admin:api-keys"] });
      const revoked = await gw.call("/api/v1/admin/mcp-oauth/revoke", {
        method: "POST",
        bearer: admin.secret,
        json: { userId: "bob", clientId: c.clientId },
      });
      expect(revoked.status).toBe(200);
      expect(await revoked.json()).toEqual({ revokedTokens: 1, removedGrants: 1 });

      for (const answer of [await listTools(serverUrl, tokens.access_token), await onReplica()]) {
        expect(answer.status).toBe(401);
        expect(await answer.json()).toMatchObject({
          jsonrpc: "2.0",
          id: 1,
          error: { message: expect.stringMatching(/authorization behind this token has been revoked/) },
        });
      }
      const res = await tokenRequest({
        grant_type: "refresh_token",
        client_id: c.clientId,
        refresh_token: tokens.refresh_token,
      });
      expect(await res.json()).toMatchObject({ error: "invalid_grant" });
    } finally {
      await replica.close();
    }
  });

  it("the console's API lists the organization's authorized clients and revokes one: its next call is refused", async () => {
    const { o, id, serverUrl, bob } = await setUp();
    const c = await codeFor(serverUrl, bob.secret);
    const tokens = (await (await exchange(c)).json()) as { access_token: string };
    const admin = await gw.createKey({ org: o.org, owner: "admin", permissions: ["admin:api-keys"] });
    const listed = await gw.call("/api/v1/admin/mcp-oauth/grants", { bearer: admin.secret });
    expect(listed.status).toBe(200);
    const { data } = (await listed.json()) as { data: { id: string; lastUsedAt: number | null }[] };
    expect(data).toEqual([
      {
        id: expect.stringMatching(/^mcpg_[0-9a-f]{32}$/),
        userId: "bob",
        clientId: c.clientId,
        clientName: "Hand-made client",
        serverId: id,
        serverName: "docs",
        resource: serverUrl.href,
        scope: "mcp:call",
        grantedAt: expect.any(Number),
        lastUsedAt: expect.any(Number),
      },
    ]);
    // Another organization neither sees nor revokes it.
    const other = await newOrg(gw);
    const stranger = await gw.createKey({ org: other.org, owner: "admin", permissions: ["admin:api-keys"] });
    expect(
      await (await gw.call("/api/v1/admin/mcp-oauth/grants", { bearer: stranger.secret })).json(),
    ).toEqual({ data: [] });
    const path = `/api/v1/admin/mcp-oauth/grants/${data[0]!.id}`;
    expect((await gw.call(path, { method: "DELETE", bearer: stranger.secret })).status).toBe(404);
    expect((await listTools(serverUrl, tokens.access_token)).status).toBe(200);

    const revoked = await gw.call(path, { method: "DELETE", bearer: admin.secret });
    expect(revoked.status).toBe(200);
    expect(await revoked.json()).toEqual({ id: data[0]!.id, revokedTokens: 1 });
    expect((await listTools(serverUrl, tokens.access_token)).status).toBe(401);
    expect(await (await gw.call("/api/v1/admin/mcp-oauth/grants", { bearer: admin.secret })).json()).toEqual({
      data: [],
    });
    expect((await gw.call(path, { method: "DELETE", bearer: admin.secret })).status).toBe(404);
  });

  it("registration is bounded: per client address in Redis (every replica counts), and registrations never used expire", async () => {
    await gw.redis.del("gw:oauth-register:address:127.0.0.1");
    const replica = await startReplica(gw, { MCP_OAUTH_REGISTRATIONS_PER_ADDRESS: "2" });
    try {
      const registerAt = (url: string) =>
        fetch(`${url}/oauth/register`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ client_name: "Counted", redirect_uris: [REDIRECT] }),
        });
      expect((await registerAt(replica.url)).status).toBe(201);
      // The test file's gateway counts against the same address.
      expect((await registerAt(gw.url)).status).toBe(201);
      const refused = await registerAt(replica.url);
      expect(refused.status).toBe(429);
      expect(Number(refused.headers.get("retry-after"))).toBeGreaterThan(0);
      // Counted by the replica that refused it (a process of its own, its counters from 0).
      const registrations = (outcome: string) =>
        sample(replica.metricsUrl, `gateway_oauth_registrations_total{kind="dynamic",outcome="${outcome}"}`);
      expect(await registrations("limited")).toBe(1);
      expect(await registrations("accepted")).toBe(1);
    } finally {
      await replica.close();
    }
  });

  it("RFC 7009 revocation and a replayed refresh token end the family's access tokens too", async () => {
    const { serverUrl, bob } = await setUp();
    const c = await codeFor(serverUrl, bob.secret);
    const tokens = (await (await exchange(c)).json()) as { access_token: string; refresh_token: string };
    expect((await listTools(serverUrl, tokens.access_token)).status).toBe(200);
    const revoke = await gw.call("/oauth/revoke", {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams({ token: tokens.refresh_token, client_id: c.clientId }),
    });
    expect(revoke.status).toBe(200);
    expect((await listTools(serverUrl, tokens.access_token)).status).toBe(401);

    const d = await codeFor(serverUrl, bob.secret);
    const first = (await (await exchange(d)).json()) as { refresh_token: string };
    const refresh = (token: string) =>
      tokenRequest({ grant_type: "refresh_token", client_id: d.clientId, refresh_token: token });
    const second = (await (await refresh(first.refresh_token)).json()) as { access_token: string };
    expect((await listTools(serverUrl, second.access_token)).status).toBe(200);
    expect((await refresh(first.refresh_token)).status).toBe(400);
    expect((await listTools(serverUrl, second.access_token)).status).toBe(401);
  });

  it("registration metadata that is not a JSON object (unreadable JSON, a form, too deep) is RFC 7591's invalid_client_metadata", async () => {
    for (const [type, body] of [
      ["application/json", "notjson"],
      [
        "application/x-www-form-urlencoded",
        new URLSearchParams({ client_name: "x", redirect_uris: REDIRECT }).toString(),
      ],
      ["text/plain", "{}"],
      ["application/json", `${"[".repeat(100)}${"]".repeat(100)}`],
      // JSON, but no object.
      ["application/json", '"abc"'],
      ["application/json", "null"],
      ["application/json", "1"],
      ["application/json", "[]"],
    ] as const) {
      const res = await gw.call("/oauth/register", {
        method: "POST",
        headers: { "content-type": type },
        body,
      });
      expect(res.status, `${type} ${body}`).toBe(400);
      const refused = await res.json();
      expect(refused, `${type} ${body}`).toEqual({
        error: "invalid_client_metadata",
        error_description: expect.any(String),
      });
    }
  });

  it("a parameter holding U+0000 or a lone surrogate is the client's error in the RFC's shape, never a 500", async () => {
    const registered = await gw.call("/oauth/register", {
      method: "POST",
      json: { client_name: "a\u0000b", redirect_uris: [REDIRECT] },
    });
    expect(registered.status).toBe(400);
    expect(await registered.json()).toMatchObject({ error: "invalid_client_metadata" });
    // A form cannot carry a lone surrogate (its bytes decode as U+FFFD): U+0000 is what reaches the server.
    const token = await tokenRequest({
      grant_type: "refresh_token",
      client_id: "a\u0000b",
      refresh_token: "x",
    });
    expect(token.status).toBe(400);
    expect(await token.json()).toMatchObject({ error: "invalid_request" });
    const authorize = await gw.call(`/oauth/authorize?response_type=code&client_id=a%00b`);
    expect(authorize.status).toBe(400);
    const o = await newOrg(gw);
    const admin = await gw.createKey({ org: o.org, owner: "admin", permissions: ["admin:api-keys"] });
    const revoked = await gw.call("/api/v1/admin/mcp-oauth/revoke", {
      method: "POST",
      bearer: admin.secret,
      json: { userId: "bob", clientId: "a\u0000b" },
    });
    expect(revoked.status).toBe(422);
  });

  it("redirect_uri: one the client did not register is refused without a redirect; the exchange must name the same one", async () => {
    const { serverUrl, bob } = await setUp();
    const clientId = await register();
    const res = await clientFetch(
      authorizationUrl({
        response_type: "code",
        client_id: clientId,
        redirect_uri: "https://attacker.example/cb",
        code_challenge: pkce().challenge,
        code_challenge_method: "S256",
        resource: serverUrl.href,
      }),
      { redirect: "manual" },
    );
    expect(res.status).toBe(400);
    expect(res.headers.get("location")).toBeNull();
    expect(await res.json()).toEqual({
      error: "invalid_request",
      error_description: expect.stringMatching(/redirect_uri/),
    });

    const c = await codeFor(serverUrl, bob.secret);
    const other = await exchange(c, { redirect_uri: "http://127.0.0.1:47123/other" });
    expect(await other.json()).toMatchObject({ error: "invalid_grant" });

    const bad = await gw.call("/oauth/register", {
      method: "POST",
      json: { redirect_uris: ["http://evil.example/cb"] },
    });
    expect(bad.status).toBe(400);
    expect(await bad.json()).toMatchObject({ error: "invalid_redirect_uri" });
  });

  it("a client metadata document at a private address is not fetched", async () => {
    const { serverUrl } = await setUp();
    for (const clientId of [
      "https://127.0.0.1/client.json",
      "https://169.254.169.254/latest/meta-data",
      "https://[::ffff:10.0.0.1]/c",
    ]) {
      const res = await clientFetch(
        codeRequestUrl(clientId, {
          resource: serverUrl.href,
        }),
        { redirect: "manual" },
      );
      expect(res.status).toBe(401);
      expect(await res.json()).toEqual({
        error: "invalid_client",
        error_description: expect.stringMatching(/was not fetched: .*non-public address/),
      });
    }
  });
});

describe("the authorization server's metrics", () => {
  it("count tokens issued by grant type, refused token requests by reason, and registrations", async () => {
    const counted = async () => {
      const text = await (await fetch(gw.metricsUrl)).text();
      return (series: string) => {
        const line = text.split("\n").find((l) => l.startsWith(`${series} `));
        return line ? Number(line.slice(series.length + 1)) : 0;
      };
    };
    const issued = (g: string) => `gateway_oauth_tokens_issued_total{grant_type="${g}"}`;
    const refused = (r: string) => `gateway_oauth_token_refusals_total{reason="${r}"}`;
    const registered = (o: string) => `gateway_oauth_registrations_total{kind="dynamic",outcome="${o}"}`;
    const series = [
      issued("authorization_code"),
      issued("refresh_token"),
      refused("invalid_grant"),
      refused("refresh_token_reused"),
      refused("unsupported_grant_type"),
      refused("invalid_request"),
      registered("accepted"),
      registered("refused"),
    ];
    const before = await counted();
    const { serverUrl, bob } = await setUp();
    const c = await codeFor(serverUrl, bob.secret);
    const first = (await (await exchange(c)).json()) as { refresh_token: string };
    const refresh = (token: string) =>
      tokenRequest({ grant_type: "refresh_token", client_id: c.clientId, refresh_token: token });
    expect((await refresh(first.refresh_token)).status).toBe(200);
    expect((await refresh(first.refresh_token)).status).toBe(400);
    const d = await codeFor(serverUrl, bob.secret);
    expect((await exchange({ ...d, verifier: pkce().verifier })).status).toBe(400);
    expect((await tokenRequest({ grant_type: "password", client_id: c.clientId })).status).toBe(400);
    expect((await tokenRequest({ grant_type: "authorization_code", client_id: c.clientId })).status).toBe(
      400,
    );
    const bad = await gw.call("/oauth/register", {
      method: "POST",
      json: { client_name: "Script", redirect_uris: ["javascript:alert(1)"] },
    });
    expect(bad.status).toBe(400);

    const after = await counted();
    expect(Object.fromEntries(series.map((n) => [n, after(n) - before(n)]))).toEqual({
      [issued("authorization_code")]: 1,
      [issued("refresh_token")]: 1,
      // The wrong verifier; the replayed refresh token is counted as what it is, not as invalid_grant.
      [refused("invalid_grant")]: 1,
      [refused("refresh_token_reused")]: 1,
      [refused("unsupported_grant_type")]: 1,
      [refused("invalid_request")]: 1,
      // codeFor registers each time.
      [registered("accepted")]: 2,
      [registered("refused")]: 1,
    });
  });
});

describe("native clients' redirect URIs (RFC 8252)", () => {
  const CURSOR = "cursor://anysphere.cursor-retrieval/oauth/user-mcp_docs/callback";

  it("a private-use scheme is registered, named on the consent page, allowed by its CSP, and receives the code", async () => {
    const { serverUrl, bob } = await setUp();
    const clientId = await register([
      CURSOR,
      "vscode://vscode.mcp/callback",
      "com.example.desk:/oauth2redirect",
    ]);
    const { verifier, challenge } = pkce();
    const { consentHtml, consentCsp, location } = await browser(
      authorizationUrl({
        response_type: "code",
        client_id: clientId,
        redirect_uri: CURSOR,
        code_challenge: challenge,
        code_challenge_method: "S256",
        resource: serverUrl.href,
        state: "n1",
      }),
      bob.secret,
    );
    expect(consentHtml).toContain("you return to <code>cursor://anysphere.cursor-retrieval</code>");
    // The consent form's answer redirects to the application: its scheme is a form target, nothing wider.
    expect(consentCsp).toMatch(/form-action 'self' cursor:;/);
    expect(location.href.startsWith(`${CURSOR}?`)).toBe(true);
    expect(location.searchParams.get("state")).toBe("n1");
    const tokens = await tokenRequest({
      grant_type: "authorization_code",
      client_id: clientId,
      code: location.searchParams.get("code")!,
      code_verifier: verifier,
      redirect_uri: CURSOR,
    });
    expect(tokens.status).toBe(200);
  });

  it("a loopback redirect may come back on another port than registered, on the same path", async () => {
    const { serverUrl, bob } = await setUp();
    const clientId = await register(["http://127.0.0.1:47123/callback"]);
    const { location } = await browser(
      authorizationUrl({
        response_type: "code",
        client_id: clientId,
        redirect_uri: "http://127.0.0.1:51234/callback",
        code_challenge: pkce().challenge,
        code_challenge_method: "S256",
        resource: serverUrl.href,
      }),
      bob.secret,
    );
    expect(location.origin + location.pathname).toBe("http://127.0.0.1:51234/callback");
    expect(location.searchParams.get("code")).toBeTruthy();
  });

  it("refuses schemes a browser runs or renders, http off loopback, fragments and credentials", async () => {
    for (const uri of [
      "javascript:alert(document.cookie)",
      "JavaScript://x/%0aalert(1)",
      "data:text/html,<script>alert(1)</script>",
      "file:///etc/passwd",
      "blob:https://desk.example/0b3f",
      "vbscript:msgbox(1)",
      "about:blank",
      "view-source:https://desk.example/",
      "wss://desk.example/cb",
      "c:/Users/desk/callback",
      "cursor:",
      "http://desk.example/callback",
      "http://127.0.0.1.desk.example/callback",
      "cursor://anysphere.cursor-retrieval/cb#fragment",
      "https://user:pass@desk.example/cb",
    ]) {
      const res = await gw.call("/oauth/register", {
        method: "POST",
        json: { client_name: "Desk", redirect_uris: [uri] },
      });
      expect(res.status, uri).toBe(400);
      expect(await res.json(), uri).toMatchObject({ error: "invalid_redirect_uri" });
    }
  });
});

describe("Client ID Metadata Documents", () => {
  let documents: HttpsDocuments;
  let replica: RunningGateway;
  beforeAll(async () => {
    documents = await startHttpsDocuments();
    // The document host is 127.0.0.1: this replica lets private addresses serve documents, and trusts its certificate.
    replica = await startReplica(
      gw,
      { MCP_OAUTH_ALLOW_PRIVATE_CLIENT_METADATA: "true" },
      createLogger("replica", "silent"),
      { clientMetadataCa: documents.ca },
    );
    gatewayUrl = () => replica.url;
  });
  afterAll(async () => {
    gatewayUrl = () => gw.url;
    await replica?.close();
    await documents?.close();
  });

  it("the SDK presents its document's URL as client_id: fetched, checked, named on the consent page, cached", async () => {
    const { bob, serverUrl } = await setUp();
    const clientId = `${documents.url}/oauth/client.json`;
    documents.documents.set("/oauth/client.json", {
      client_id: clientId,
      client_name: "Metadata host",
      redirect_uris: [REDIRECT],
      token_endpoint_auth_method: "none",
    });
    const provider = new MemoryProvider(REDIRECT, clientId);
    const { consentHtml } = await authorize(serverUrl, bob.secret, provider);
    expect(provider.client?.client_id).toBe(clientId);
    expect(consentHtml).toContain("Metadata host");
    const { client } = await connect(serverUrl, provider);
    expect((await client.listTools()).tools.map((t) => t.name).sort()).toEqual([
      "lookup",
      "read_file",
      "search",
      "slow",
    ]);
    await client.close();
    // Fetched once for the authorization request and the token request together: the cache answered after.
    expect(documents.requests.filter((p) => p === "/oauth/client.json")).toHaveLength(1);
  });

  it("a document may list a native application's scheme, and not a javascript: URI", async () => {
    const { serverUrl } = await setUp();
    const native = "cursor://anysphere.cursor-retrieval/oauth/user-mcp_docs/callback";
    documents.documents.set("/native.json", {
      client_id: `${documents.url}/native.json`,
      client_name: "Native host",
      redirect_uris: [native],
    });
    documents.documents.set("/script.json", {
      client_id: `${documents.url}/script.json`,
      redirect_uris: [native, "javascript:alert(1)"],
    });
    const ask = (path: string) =>
      clientFetch(
        authorizationUrl({
          response_type: "code",
          client_id: `${documents.url}${path}`,
          redirect_uri: native,
          code_challenge: pkce().challenge,
          code_challenge_method: "S256",
          resource: serverUrl.href,
        }),
        { redirect: "manual" },
      );
    const documentsCounted = (outcome: string) =>
      sample(
        replica.metricsUrl,
        `gateway_oauth_registrations_total{kind="metadata_document",outcome="${outcome}"}`,
      );
    const [acceptedBefore, refusedBefore] = [
      await documentsCounted("accepted"),
      await documentsCounted("refused"),
    ];
    const page = await ask("/native.json");
    expect(page.status).toBe(200);
    expect(await page.text()).toContain("Native host");
    const refused = await ask("/script.json");
    expect(refused.status).toBe(401);
    expect(await refused.json()).toEqual({
      error: "invalid_client",
      error_description: expect.stringMatching(/javascript:alert\(1\)/),
    });
    expect(await documentsCounted("accepted")).toBe(acceptedBefore + 1);
    expect(await documentsCounted("refused")).toBe(refusedBefore + 1);
  });

  it("a document that names another client_id, or lists a redirect URI that is not allowed, is invalid_client", async () => {
    const { serverUrl } = await setUp();
    documents.documents.set("/other.json", {
      client_id: "https://elsewhere.example/c.json",
      redirect_uris: [REDIRECT],
    });
    documents.documents.set("/bad-redirect.json", {
      client_id: `${documents.url}/bad-redirect.json`,
      redirect_uris: ["http://evil.example/cb"],
    });
    for (const [path, why] of [
      ["/other.json", /names another client_id/],
      ["/bad-redirect.json", /redirect URI/],
      ["/missing.json", /HTTP 404/],
    ] as const) {
      const res = await clientFetch(
        codeRequestUrl(`${documents.url}${path}`, {
          resource: serverUrl.href,
        }),
        { redirect: "manual" },
      );
      expect(res.status).toBe(401);
      expect(await res.json()).toEqual({
        error: "invalid_client",
        error_description: expect.stringMatching(why),
      });
    }
  });
});
