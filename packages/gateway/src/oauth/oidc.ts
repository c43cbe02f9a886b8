import { createHash, randomBytes } from "node:crypto";
import { entryBound } from "@gw/core/bounded-cache";
import { fetchGuardedJson, type UpstreamPolicy, UpstreamRefused } from "@gw/core/mcp";
import { principalUserIdSchema } from "@gw/core/principal";
import { createLocalJWKSet, type JSONWebKeySet, errors as joseErrors, jwtVerify } from "jose";
import { LRUCache } from "lru-cache";

/** What the gateway needs of an OpenID provider's discovery document. */
export interface ProviderMetadata {
  issuer: string;
  authorization_endpoint: string;
  token_endpoint: string;
  jwks_uri: string;
}

/** The gateway's client at an organization's OpenID provider (its secret opened from the vault). */
export interface OidcClient {
  issuer: string;
  clientId: string;
  clientSecret: string;
}

/** The browser's round trip to the provider: kept with the authorization request, checked at the callback. */
export interface OidcRoundTrip {
  nonce: string;
  codeVerifier: string;
}

/** Why a sign-in at the provider did not give an end user; the message names no secret and no token. */
export class OidcSignInFailed extends Error {
  constructor(message: string) {
    super(message);
    this.name = "OidcSignInFailed";
  }
}

const MAX_DOCUMENT_BYTES = 64 * 1024;
const DISCOVERY_TTL_MS = 5 * 60_000;

/**
 * The relying-party side of an organization's OpenID Connect sign-in: the
 * provider's discovery document and keys fetched through the upstream
 * address policy (its own switch, `MCP_OAUTH_ALLOW_PRIVATE_IDENTITY_PROVIDERS`),
 * the code exchanged with the client secret, and the ID token verified
 * (signature by the provider's keys, issuer, audience, nonce, expiry).
 */
export class OidcRelyingParty {
  private readonly policy: UpstreamPolicy;
  private readonly timeoutMs: number;
  private readonly discovered = new LRUCache<
    string,
    { metadata: ProviderMetadata; keys: ReturnType<typeof createLocalJWKSet> }
  >({ ...entryBound(1_000), ttl: DISCOVERY_TTL_MS });

  constructor(options: { policy: UpstreamPolicy; timeoutMs: number }) {
    this.policy = options.policy;
    this.timeoutMs = options.timeoutMs;
  }

  /** The provider's discovery document, checked; `OidcSignInFailed` when it cannot be had or does not fit. */
  async discover(issuer: string, fresh = false) {
    const cached = fresh ? undefined : this.discovered.get(issuer);
    if (cached) return cached;
    const url = `${issuer.replace(/\/$/, "")}/.well-known/openid-configuration`;
    const document = (await this.fetch(url, "discovery document")) as Partial<ProviderMetadata>;
    const fields = ["issuer", "authorization_endpoint", "token_endpoint", "jwks_uri"] as const;
    for (const field of fields)
      if (typeof document?.[field] !== "string")
        throw new OidcSignInFailed(`The provider's discovery document lacks '${field}'`);
    if (document.issuer !== issuer)
      throw new OidcSignInFailed("The provider's discovery document names another issuer");
    const metadata = Object.fromEntries(fields.map((f) => [f, document[f]])) as unknown as ProviderMetadata;
    for (const endpoint of [metadata.authorization_endpoint, metadata.token_endpoint, metadata.jwks_uri])
      await this.check(endpoint);
    const jwks = (await this.fetch(metadata.jwks_uri, "key set")) as JSONWebKeySet;
    if (!Array.isArray(jwks?.keys)) throw new OidcSignInFailed("The provider's jwks_uri holds no key set");
    const entry = { metadata, keys: createLocalJWKSet(jwks) };
    this.discovered.set(issuer, entry);
    return entry;
  }

  /** Where the browser goes to sign in, and what the callback will check. */
  async authorizationUrl(
    client: OidcClient,
    redirectUri: string,
    state: string,
  ): Promise<{ url: string; roundTrip: OidcRoundTrip }> {
    const { metadata } = await this.discover(client.issuer);
    const roundTrip = {
      nonce: randomBytes(32).toString("base64url"),
      codeVerifier: randomBytes(32).toString("base64url"),
    };
    const url = new URL(metadata.authorization_endpoint);
    url.searchParams.set("response_type", "code");
    url.searchParams.set("client_id", client.clientId);
    url.searchParams.set("redirect_uri", redirectUri);
    url.searchParams.set("scope", "openid");
    url.searchParams.set("state", state);
    url.searchParams.set("nonce", roundTrip.nonce);
    url.searchParams.set(
      "code_challenge",
      createHash("sha256").update(roundTrip.codeVerifier).digest("base64url"),
    );
    url.searchParams.set("code_challenge_method", "S256");
    return { url: url.href, roundTrip };
  }

  /** Exchanges the provider's code and verifies its ID token: the end user's `sub`. */
  async signedIn(
    client: OidcClient,
    redirectUri: string,
    code: string,
    roundTrip: OidcRoundTrip,
  ): Promise<string> {
    const { metadata } = await this.discover(client.issuer);
    // RFC 6749 2.3.1: the id and secret are form-encoded before Basic.
    const basic = Buffer.from(
      `${encodeURIComponent(client.clientId)}:${encodeURIComponent(client.clientSecret)}`,
    ).toString("base64");
    const answer = (await this.fetch(metadata.token_endpoint, "token endpoint", {
      body: new URLSearchParams({
        grant_type: "authorization_code",
        code,
        redirect_uri: redirectUri,
        code_verifier: roundTrip.codeVerifier,
      }),
      headers: { authorization: `Basic ${basic}` },
    })) as { id_token?: unknown };
    if (typeof answer?.id_token !== "string")
      throw new OidcSignInFailed("The provider's token answer holds no ID token");
    return this.verify(client, answer.id_token, roundTrip.nonce);
  }

  /** The ID token's `sub`, if the token is the provider's, for this client and this sign-in. */
  async verify(client: OidcClient, idToken: string, nonce: string): Promise<string> {
    const verifyWith = async (fresh: boolean) => {
      const { keys } = await this.discover(client.issuer, fresh);
      return jwtVerify(idToken, keys, {
        issuer: client.issuer,
        audience: client.clientId,
        requiredClaims: ["sub", "exp", "iat", "nonce"],
        clockTolerance: 30,
      });
    };
    let payload: Awaited<ReturnType<typeof verifyWith>>["payload"];
    try {
      try {
        payload = (await verifyWith(false)).payload;
      } catch (err) {
        // The provider may have rotated its keys since they were fetched: once more with fresh ones.
        if (!(err instanceof joseErrors.JWKSNoMatchingKey)) throw err;
        payload = (await verifyWith(true)).payload;
      }
    } catch (err) {
      if (err instanceof OidcSignInFailed) throw err;
      const reason =
        err instanceof joseErrors.JWTClaimValidationFailed
          ? `its '${err.claim}' claim is not as expected`
          : "it is not signed by the provider or has expired";
      throw new OidcSignInFailed(`The provider's ID token is refused: ${reason}`);
    }
    if (payload.nonce !== nonce)
      throw new OidcSignInFailed("The provider's ID token is refused: its 'nonce' claim is not as expected");
    if (payload.azp !== undefined && payload.azp !== client.clientId)
      throw new OidcSignInFailed("The provider's ID token is refused: its 'azp' claim is not as expected");
    const sub = principalUserIdSchema.safeParse(payload.sub);
    if (!sub.success)
      throw new OidcSignInFailed(
        "The provider's subject is not a user id of this gateway (1 to 256 printable ASCII characters)",
      );
    return sub.data;
  }

  private async check(url: string) {
    try {
      await this.policy.check(url);
    } catch (err) {
      if (err instanceof UpstreamRefused)
        throw new OidcSignInFailed(`The provider's endpoint ${url} is refused: ${err.message}`);
      throw err;
    }
  }

  private async fetch(
    url: string,
    what: string,
    form?: { body: URLSearchParams; headers: Record<string, string> },
  ): Promise<unknown> {
    try {
      return await fetchGuardedJson(this.policy, url, {
        timeoutMs: this.timeoutMs,
        maxBytes: MAX_DOCUMENT_BYTES,
        form,
      });
    } catch (err) {
      if (err instanceof UpstreamRefused)
        throw new OidcSignInFailed(`The OpenID provider's ${what} (${url}) is refused: ${err.message}`);
      throw err;
    }
  }
}
