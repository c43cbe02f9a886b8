import { createHash, randomBytes } from "node:crypto";
import type { Clock } from "@gw/core/clock";
import { AppError, OAuthError, type OAuthErrorCode, ValidationFailed } from "@gw/core/errors";
import { fromFramework, jsonBody } from "@gw/core/http";
import type { Logger } from "@gw/core/logger";
import { MCP_CALL, mcpProxyUrl, serverOfProxyUrl, VaultUnreadable } from "@gw/core/mcp";
import { assertMayActFor, type KeyOwners } from "@gw/core/on-behalf-of";
import type { Principal } from "@gw/core/principal";
import express, { type NextFunction, type Request, type Response, Router } from "express";
import type { ApiKeyLookup } from "../api-keys/lookup.ts";
import { type ApiKeyRecord, keyUsable } from "../api-keys/types.ts";
import { cookiesOf } from "../console/console-router.ts";
import { sameToken } from "../console/sessions.ts";
import { type SignInAttempt, SignInLimited, type SignInLimits } from "../console/sign-in-limits.ts";
import { serverFor } from "../mcp/access.ts";
import type { McpDeps } from "../mcp/deps.ts";
import { type GatewayMetrics, OAUTH_TOKEN_REFUSALS, type OAuthTokenRefusal } from "../metrics.ts";
import type { TokenService } from "../tokens/tokens.ts";
import {
  type OAuthClient,
  type OAuthClients,
  redirectFormSource,
  redirectTarget,
  redirectUriMatches,
} from "./clients.ts";
import type { ConsentGrants } from "./grants.ts";
import type { IdentityProviders } from "./identity-providers.ts";
import { OAUTH_PATHS } from "./metadata.ts";
import { type OidcRelyingParty, OidcSignInFailed } from "./oidc.ts";
import { authorizeSignInPage, consentPage } from "./pages.ts";
import type { RefreshTokens } from "./refresh-tokens.ts";
import type { RegistrationLimits } from "./registration-limits.ts";
import type { AuthorizationRequests, PendingAuthorization } from "./requests.ts";

export interface AuthorizationServerDeps {
  /** `GATEWAY_PUBLIC_URL`: the issuer, and the origin of every MCP server URL a token may be for. */
  publicUrl: string;
  clients: OAuthClients;
  requests: AuthorizationRequests;
  refreshTokens: RefreshTokens;
  grants: ConsentGrants;
  tokens: TokenService;
  keys: Pick<ApiKeyLookup, "findById" | "findBySecret">;
  mcp: Pick<McpDeps, "authorization" | "servers">;
  /** Organizations' own OpenID providers; without them every sign-in is the development one (an API key). */
  identityProviders?: IdentityProviders | undefined;
  oidc?: OidcRelyingParty | undefined;
  /** Who owns the organization's keys: a provider's subject acts through a key within its on-behalf-of policy. */
  keyOwners?: KeyOwners | undefined;
  /** Failed sign-ins are counted with the console's (one budget per address and organization). */
  signInLimits?: SignInLimits | undefined;
  /** Registrations per client address (`MCP_OAUTH_REGISTRATIONS_PER_ADDRESS`); without it, unbounded (tests). */
  registrationLimits?: RegistrationLimits | undefined;
  /** `MCP_OAUTH_ACCESS_TOKEN_TTL`, in seconds. */
  accessTokenTtlSeconds: number;
  metrics?:
    | Pick<GatewayMetrics, "oauthTokensIssued" | "oauthTokenRefusals" | "oauthRegistrations">
    | undefined;
  logger: Logger;
  clock: Clock;
}

/** The cookie that ties a consent form to the browser that signed in (CSRF). */
const CONSENT_COOKIE = "gw_oauth_consent";
/**
 * The cookie that ties the OpenID provider's callback to the browser that was
 * sent there (login CSRF). Lax: the callback is a top-level navigation from
 * the provider's site, which a strict cookie would not accompany.
 */
const OIDC_COOKIE = "gw_oauth_oidc";
/** RFC 7636 4.1: 43 to 128 unreserved characters. */
const CODE_VERIFIER = /^[A-Za-z0-9._~-]{43,128}$/;
const CODE_CHALLENGE = /^[A-Za-z0-9_-]{43}$/;
/**
 * Scopes some clients add to every request, taken and ignored (the tokens' scope is `mcp:call`, which the
 * token response says): `openid` (a client that read the OpenID discovery document; no ID token is
 * issued) and `offline_access` (refresh tokens come with every code anyway).
 */
const TOLERATED_SCOPES: ReadonlySet<string> = new Set(["", "openid", "offline_access"]);

/**
 * The gateway's OAuth 2.1 authorization server for MCP clients
 * (docs/api/mcp-oauth.md, ADR 0023): the authorization code flow with PKCE
 * (S256 only), a token for exactly one MCP server of the gateway (RFC 8707
 * `resource`, the token's `aud`), dynamic client registration and Client ID
 * Metadata Documents, rotating refresh tokens. The end user signs in with an
 * API key (development sign-in): the key's owner is the user, and the key's
 * quotas and revocation apply to every token.
 */
export function authorizationServer(deps: AuthorizationServerDeps): Router {
  const router = Router();
  const form = express.urlencoded({ extended: false, limit: "16kb", parameterLimit: 32 });
  // Every parameter is checked once, here: one holding U+0000 or a lone surrogate can be neither stored
  // (PostgreSQL's text refuses it) nor sent back as it came, so it is the client's error, not a 500.
  const storable = (code: OAuthErrorCode) => (req: Request, _res: Response, next: NextFunction) => {
    if (!allStorable(req.query) || !allStorable(req.body))
      throw new OAuthError(code, "A parameter holds U+0000 or a lone surrogate");
    next();
  };
  const params = storable("invalid_request");
  const secureCookies = deps.publicUrl.startsWith("https:");
  const callbackUrl = `${deps.publicUrl}${OAUTH_PATHS.callback}`;

  /** The MCP server id a resource URL names: one proxy URL of this gateway, exactly. */
  const serverOfResource = (resource: unknown): string | undefined => {
    if (typeof resource !== "string") return undefined;
    return serverOfProxyUrl(deps.publicUrl, resource);
  };

  const noStore = (res: Response) => {
    res.set("Cache-Control", "no-store");
    res.set("Pragma", "no-cache");
  };

  const pageHeaders = (res: Response, redirectUri?: string) => {
    const formTargets = ["'self'", ...(redirectUri ? [redirectFormSource(redirectUri)] : [])].join(" ");
    res.setHeader(
      "Content-Security-Policy",
      `default-src 'none'; style-src 'self'; img-src data:; form-action ${formTargets}; frame-ancestors 'none'; base-uri 'none'`,
    );
    res.setHeader("X-Frame-Options", "DENY");
    res.setHeader("X-Content-Type-Options", "nosniff");
    res.setHeader("Referrer-Policy", "no-referrer");
    noStore(res);
  };

  /** Sends the browser back to the client with the answer (RFC 6749 4.1.2, RFC 9207's `iss`). */
  const redirectBack = (
    res: Response,
    request: Pick<PendingAuthorization, "redirectUri" | "state">,
    params: Record<string, string>,
  ) => {
    const url = new URL(request.redirectUri);
    for (const [name, value] of Object.entries(params)) url.searchParams.set(name, value);
    if (request.state !== undefined) url.searchParams.set("state", request.state);
    url.searchParams.set("iss", deps.publicUrl);
    noStore(res);
    res.redirect(302, url.href);
  };
  const redirectError = (
    res: Response,
    request: Pick<PendingAuthorization, "redirectUri" | "state">,
    error: OAuthErrorCode,
    description: string,
  ) => redirectBack(res, request, { error, error_description: description });

  const single = (value: unknown, name: string): string | undefined => {
    if (value === undefined) return undefined;
    if (typeof value !== "string") throw new OAuthError("invalid_request", `Send '${name}' once`);
    return value;
  };

  /**
   * The OpenID provider of the organization that holds the server, if it
   * named one. A secret that no longer opens fails the sign-in
   * (`temporarily_unavailable`): it never falls back to the API-key sign-in
   * the organization did not choose.
   */
  const providerOf = async (serverId: string) => {
    try {
      return await deps.identityProviders?.forServer(serverId);
    } catch (err) {
      if (err instanceof VaultUnreadable)
        throw new OAuthError("temporarily_unavailable", "The organization's sign-in is unavailable");
      throw err;
    }
  };

  /** The client, or `invalid_client`: nothing is redirected to a client that is not known. */
  const clientOf = async (clientId: string | undefined): Promise<OAuthClient> => {
    if (!clientId) throw new OAuthError("invalid_request", "Missing 'client_id'");
    const client = await deps.clients.find(clientId);
    if (!client) throw new OAuthError("invalid_client", "Unknown client_id");
    return client;
  };

  // Authorization request (RFC 6749 4.1.1, RFC 7636 4.3, RFC 8707 2): checked, then the sign-in page.
  router.get(OAUTH_PATHS.authorize, params, async (req, res) => {
    const q = req.query as Record<string, unknown>;
    const client = await clientOf(single(q.client_id, "client_id"));
    const requested = single(q.redirect_uri, "redirect_uri");
    const redirectUri =
      requested ?? (client.redirect_uris.length === 1 ? client.redirect_uris[0] : undefined);
    if (!redirectUri) throw new OAuthError("invalid_request", "Missing 'redirect_uri'");
    if (!redirectUriMatches(client.redirect_uris, redirectUri))
      throw new OAuthError("invalid_request", "redirect_uri is not one of the client's redirect URIs");
    const state = single(q.state, "state");
    const back = { redirectUri, state };
    // From here on the client is known and its redirect URI checked: errors go back to it.
    try {
      if (single(q.response_type, "response_type") !== "code")
        return redirectError(res, back, "unsupported_response_type", "response_type must be 'code'");
      const challenge = single(q.code_challenge, "code_challenge");
      const method = single(q.code_challenge_method, "code_challenge_method");
      if (!challenge)
        return redirectError(res, back, "invalid_request", "PKCE is required: send a code_challenge (S256)");
      if (method !== "S256")
        return redirectError(
          res,
          back,
          "invalid_request",
          "code_challenge_method must be S256 (plain is refused)",
        );
      if (!CODE_CHALLENGE.test(challenge))
        return redirectError(
          res,
          back,
          "invalid_request",
          "code_challenge must be the S256 of the code verifier: 43 base64url characters",
        );
      const resource = single(q.resource, "resource");
      const serverId = serverOfResource(resource);
      if (!resource || !serverId)
        return redirectError(
          res,
          back,
          "invalid_target",
          `resource must be the URL of one MCP server of this gateway (${mcpProxyUrl(deps.publicUrl, "{id}")})`,
        );
      const scope = single(q.scope, "scope");
      if (scope !== undefined && !scope.split(" ").every((s) => s === MCP_CALL || TOLERATED_SCOPES.has(s)))
        return redirectError(res, back, "invalid_scope", `The only scope is '${MCP_CALL}'`);
      const pending: PendingAuthorization = {
        clientId: client.client_id,
        clientName: client.client_name,
        redirectUri,
        state,
        codeChallenge: challenge,
        resource,
        serverId,
        scope: MCP_CALL,
      };
      const id = await deps.requests.begin(pending);
      const provider = await providerOf(serverId);
      if (provider && deps.oidc) {
        // The organization signs its users in itself: off to its provider, back at the callback.
        const { url, roundTrip } = await deps.oidc
          .authorizationUrl(provider, callbackUrl, id)
          .catch((err: unknown) => {
            if (err instanceof OidcSignInFailed) {
              deps.logger.warn({ org: provider.org, reason: err.message }, "an OpenID provider is unusable");
              throw new OAuthError("temporarily_unavailable", "The organization's sign-in is unavailable");
            }
            throw err;
          });
        const browser = randomBytes(32).toString("base64url");
        await deps.requests.update(id, {
          ...pending,
          oidc: { issuer: provider.issuer, ...roundTrip, browser },
        });
        res.cookie(OIDC_COOKIE, browser, {
          httpOnly: true,
          sameSite: "lax",
          secure: secureCookies || req.secure,
          path: OAUTH_PATHS.callback,
          maxAge: 600_000,
        });
        noStore(res);
        return res.redirect(302, url);
      }
      pageHeaders(res);
      res
        .type("html")
        .send(authorizeSignInPage({ request: id, clientName: nameOf(pending), serverLabel: serverId }));
    } catch (err) {
      if (err instanceof OAuthError) return redirectError(res, back, err.oauthCode, err.message);
      throw err;
    }
  });

  router.post(OAUTH_PATHS.authorize, form, params, async (req, res) => {
    const body = (req.body ?? {}) as Record<string, unknown>;
    const id = typeof body.request === "string" ? body.request : "";
    const pending = await deps.requests.get(id);
    if (!pending)
      throw new OAuthError(
        "invalid_request",
        "This authorization request has ended or never began: start again from the client",
      );
    // A request sent to the organization's provider is signed in there, never with a key.
    if (body.step === "sign-in" && !pending.oidc) return signIn(req, res, id, pending, body);
    if (body.step === "consent") return consent(req, res, id, pending, body);
    throw new OAuthError("invalid_request", "Unknown step");
  });

  const signIn = async (
    req: Request,
    res: Response,
    id: string,
    pending: PendingAuthorization,
    body: Record<string, unknown>,
  ) => {
    const again = (failed: string, status = 200) => {
      pageHeaders(res);
      res
        .status(status)
        .type("html")
        .send(
          authorizeSignInPage({
            request: id,
            clientName: nameOf(pending),
            serverLabel: pending.serverId,
            failed,
          }),
        );
    };
    let attempt: SignInAttempt | undefined;
    try {
      attempt = await deps.signInLimits?.attempt(req.ip ?? req.socket.remoteAddress ?? "unknown");
      const secret = typeof body.key === "string" ? body.key.trim() : "";
      const key = secret && secret.length <= 256 ? await deps.keys.findBySecret(secret) : undefined;
      if (key) await attempt?.naming(key.org);
      if (!key || !keyUsable(key, deps.clock.wall())) return again("invalid");
      if (!key.permissions.includes(MCP_CALL)) return again("permission");
      const server = await readableServer(principalOf(key), pending.serverId);
      if (!server) return again("server");
      await attempt?.succeeded();
      await showConsent(req, res, id, pending, { org: key.org, user: key.owner, keyId: key.id }, server);
    } catch (err) {
      if (err instanceof SignInLimited) {
        res.set(err.headers);
        return again("invalid", 429);
      }
      throw err;
    }
  };

  /** The signed-in user's consent page, its form tied to this browser by a cookie. */
  const showConsent = async (
    req: Request,
    res: Response,
    id: string,
    pending: PendingAuthorization,
    signedIn: { org: string; user: string; keyId: string },
    server: { id: string; name: string; description: string | null },
  ) => {
    const consentToken = randomBytes(32).toString("base64url");
    if (!(await deps.requests.update(id, { ...pending, signedIn, consentToken })))
      throw new OAuthError(
        "invalid_request",
        "This authorization request has ended: start again from the client",
      );
    const earlier = await deps.grants.find(signedIn.org, signedIn.user, pending.clientId, pending.resource);
    res.cookie(CONSENT_COOKIE, consentToken, {
      httpOnly: true,
      sameSite: "strict",
      secure: secureCookies || req.secure,
      path: "/oauth",
      maxAge: 600_000,
    });
    pageHeaders(res, pending.redirectUri);
    res.type("html").send(
      consentPage({
        request: id,
        consentToken,
        clientName: nameOf(pending),
        clientId: pending.clientId,
        serverLabel: `${server.name} (${server.id})`,
        serverDescription: server.description,
        user: signedIn.user,
        redirectHost: redirectTarget(pending.redirectUri),
        previouslyGrantedAt: earlier?.grantedAt,
      }),
    );
  };

  /** The server, if `principal` may read it; undefined when it may not (or it is gone). */
  const readableServer = (principal: Principal, serverId: string) =>
    serverFor(deps.mcp, principal, serverId, "reader").catch((err: unknown) => {
      if (err instanceof AppError && (err.code === "not_found" || err.code === "forbidden")) return undefined;
      throw err;
    });

  // The organization's OpenID provider sends the browser back (OpenID Connect Core 3.1.2.5): the code is
  // exchanged, the ID token verified, and its subject becomes the end user, acting through the
  // organization's key as X-On-Behalf-Of would name them.
  router.get(OAUTH_PATHS.callback, params, async (req, res) => {
    const q = req.query as Record<string, unknown>;
    const id = single(q.state, "state") ?? "";
    const pending = await deps.requests.get(id);
    if (!pending?.oidc)
      throw new OAuthError(
        "invalid_request",
        "This sign-in has ended or never began: start again from the client",
      );
    const cookie = cookiesOf(req).get(OIDC_COOKIE);
    if (!cookie || !sameToken(cookie, pending.oidc.browser))
      throw new OAuthError("access_denied", "This sign-in did not begin in this browser");
    res.clearCookie(OIDC_COOKIE, { path: OAUTH_PATHS.callback });
    const fail = async (description: string) => {
      const ended = await deps.requests.finish(id);
      if (!ended) throw new OAuthError("invalid_request", "This authorization request was already decided");
      return redirectError(res, ended, "access_denied", description);
    };
    if (q.error !== undefined)
      return fail("The sign-in at the organization's OpenID provider did not complete");
    const provider = await providerOf(pending.serverId).catch((err: unknown) => {
      if (err instanceof OAuthError) return undefined;
      throw err;
    });
    if (!provider || !deps.oidc || provider.issuer !== pending.oidc.issuer)
      return fail("The organization's OpenID provider is unavailable or changed during the sign-in");
    // RFC 9207: a provider that names itself must be the one the browser was sent to.
    const iss = single(q.iss, "iss");
    if (iss !== undefined && iss !== provider.issuer)
      return fail("The sign-in came back from another issuer");
    const code = single(q.code, "code");
    if (!code || code.length > 4_096) return fail("The OpenID provider sent no code");
    let sub: string;
    try {
      sub = await deps.oidc.signedIn(provider, callbackUrl, code, pending.oidc);
    } catch (err) {
      if (!(err instanceof OidcSignInFailed)) throw err;
      deps.logger.warn(
        { org: provider.org, reason: err.message },
        "a sign-in at an OpenID provider was refused",
      );
      return fail(err.message);
    }
    const key = await deps.keys.findById(provider.keyId);
    if (
      !key ||
      key.org !== provider.org ||
      !keyUsable(key, deps.clock.wall()) ||
      !key.permissions.includes(MCP_CALL)
    )
      return fail(`The organization's API key for signed-in users is revoked, expired or lacks ${MCP_CALL}`);
    if (deps.keyOwners) {
      try {
        await assertMayActFor(key, sub, "The signed-in user", deps.keyOwners);
      } catch (err) {
        if (err instanceof AppError && err.code === "forbidden") return fail(err.message);
        throw err;
      }
    }
    const server = await readableServer(endUserOf(key, sub), pending.serverId);
    if (!server) return fail(`The user ${sub} may not use this MCP server`);
    await showConsent(req, res, id, pending, { org: key.org, user: sub, keyId: key.id }, server);
  });

  const consent = async (
    req: Request,
    res: Response,
    id: string,
    pending: PendingAuthorization,
    body: Record<string, unknown>,
  ) => {
    const cookie = cookiesOf(req).get(CONSENT_COOKIE);
    if (
      !pending.signedIn ||
      !pending.consentToken ||
      !cookie ||
      !sameToken(cookie, pending.consentToken) ||
      !sameToken(body.consent, pending.consentToken)
    )
      throw new OAuthError("access_denied", "This consent does not belong to this browser's sign-in");
    // Decided once: a second submission finds the request gone.
    const decided = await deps.requests.finish(id);
    if (!decided?.signedIn)
      throw new OAuthError("invalid_request", "This authorization request was already decided");
    res.clearCookie(CONSENT_COOKIE, { path: "/oauth" });
    if (body.decision !== "allow")
      return redirectError(res, decided, "access_denied", "The user denied access");
    const { org, user, keyId } = decided.signedIn;
    await deps.grants.record(org, {
      user,
      clientId: decided.clientId,
      clientName: decided.clientName,
      resource: decided.resource,
      scope: decided.scope,
    });
    const code = await deps.requests.issueCode({
      clientId: decided.clientId,
      redirectUri: decided.redirectUri,
      codeChallenge: decided.codeChallenge,
      resource: decided.resource,
      scope: decided.scope,
      org,
      user,
      keyId,
    });
    deps.logger.info(
      { org, user, clientId: decided.clientId, resource: decided.resource },
      "MCP client authorized",
    );
    redirectBack(res, decided, { code });
  };

  /** The key behind a grant, still usable and still holding the scope; `invalid_grant` otherwise. */
  const liveKey = async (grant: { keyId: string; org: string }): Promise<ApiKeyRecord> => {
    const key = await deps.keys.findById(grant.keyId);
    if (
      !key ||
      key.org !== grant.org ||
      !keyUsable(key, deps.clock.wall()) ||
      !key.permissions.includes(MCP_CALL)
    )
      throw new OAuthError(
        "invalid_grant",
        `The API key behind this authorization is revoked, expired or lacks ${MCP_CALL}`,
      );
    return key;
  };

  // `sid` names the authorization (refresh-token family): revoking it ends this token at the next call.
  const accessToken = (
    grant: { org: string; user: string; keyId: string; resource: string },
    family: string,
  ) =>
    deps.tokens.sign(
      {
        sub: grant.user,
        aud: grant.resource,
        org: grant.org,
        keyId: grant.keyId,
        permissions: [MCP_CALL],
        sid: family,
      },
      deps.accessTokenTtlSeconds,
    );

  // Token request (RFC 6749 4.1.3 and 6): public clients name themselves with client_id.
  router.post(OAUTH_PATHS.token, form, params, async (req, res) => {
    const body = (req.body ?? {}) as Record<string, unknown>;
    const grantType = single(body.grant_type, "grant_type");
    const clientId = single(body.client_id, "client_id");
    const resource = single(body.resource, "resource");
    noStore(res);
    if (grantType === "authorization_code") {
      const client = await clientOf(clientId);
      const code = single(body.code, "code");
      const verifier = single(body.code_verifier, "code_verifier");
      if (!code) throw new OAuthError("invalid_request", "Missing 'code'");
      if (!verifier || !CODE_VERIFIER.test(verifier))
        throw new OAuthError(
          "invalid_request",
          "code_verifier must be 43 to 128 unreserved characters (PKCE)",
        );
      const grant = await deps.requests.redeemCode(code);
      if (!grant || grant.clientId !== client.client_id)
        throw new OAuthError("invalid_grant", "The authorization code is unknown, used or expired");
      if (single(body.redirect_uri, "redirect_uri") !== grant.redirectUri)
        throw new OAuthError("invalid_grant", "redirect_uri differs from the authorization request's");
      if (createHash("sha256").update(verifier).digest("base64url") !== grant.codeChallenge)
        throw new OAuthError("invalid_grant", "code_verifier does not match the code_challenge (PKCE)");
      if (resource !== undefined && resource !== grant.resource)
        throw new OAuthError("invalid_target", "resource differs from the one the user authorized");
      await liveKey(grant);
      await Promise.all([
        deps.clients.markUsed(client.client_id),
        deps.grants.touch(grant.org, grant.user, grant.clientId, grant.resource),
      ]);
      const refresh = await deps.refreshTokens.issue({
        org: grant.org,
        user: grant.user,
        keyId: grant.keyId,
        clientId: grant.clientId,
        resource: grant.resource,
        scope: grant.scope,
      });
      const answer = tokenResponse(
        await accessToken(grant, refresh.family),
        refresh.token,
        deps.accessTokenTtlSeconds,
        grant.scope,
      );
      deps.metrics?.oauthTokensIssued.inc({ grant_type: grantType });
      return res.json(answer);
    }
    if (grantType === "refresh_token") {
      const client = await clientOf(clientId);
      const token = single(body.refresh_token, "refresh_token");
      if (!token) throw new OAuthError("invalid_request", "Missing 'refresh_token'");
      const rotation = await deps.refreshTokens.rotate(token, client.client_id, resource);
      if (rotation.outcome === "reused") {
        res.locals.oauthRefusal = "refresh_token_reused" satisfies OAuthTokenRefusal;
        deps.logger.warn(
          { clientId: client.client_id },
          "a used refresh token was presented again: its family is revoked",
        );
        throw new OAuthError(
          "invalid_grant",
          "The refresh token was already used: every token of this authorization is revoked",
        );
      }
      if (rotation.outcome === "other_resource")
        throw new OAuthError(
          "invalid_target",
          "The refresh token was issued for another resource: ask with the resource it was issued for",
        );
      if (rotation.outcome === "invalid")
        throw new OAuthError("invalid_grant", "The refresh token is unknown, revoked or expired");
      await liveKey(rotation.grant);
      const { org, user, clientId: holder, resource: granted } = rotation.grant;
      await deps.grants.touch(org, user, holder, granted);
      const answer = tokenResponse(
        await accessToken(rotation.grant, rotation.family),
        rotation.token,
        deps.accessTokenTtlSeconds,
        rotation.grant.scope,
      );
      deps.metrics?.oauthTokensIssued.inc({ grant_type: grantType });
      return res.json(answer);
    }
    if (grantType === undefined) throw new OAuthError("invalid_request", "Missing 'grant_type'");
    throw new OAuthError("unsupported_grant_type", "grant_type must be authorization_code or refresh_token");
  });
  // Every refusal of the token endpoint is counted, the body parser's and the parameter check's too.
  router.use(OAUTH_PATHS.token, (err: unknown, _req: Request, res: Response, next: NextFunction) => {
    deps.metrics?.oauthTokenRefusals.inc({ reason: res.locals.oauthRefusal ?? tokenRefusal(err) });
    next(err);
  });

  // Token revocation (RFC 7009): the refresh token's whole authorization; an unknown token is no error.
  router.post(OAUTH_PATHS.revoke, form, params, async (req, res) => {
    const body = (req.body ?? {}) as Record<string, unknown>;
    const client = await clientOf(single(body.client_id, "client_id"));
    const token = single(body.token, "token");
    if (!token) throw new OAuthError("invalid_request", "Missing 'token'");
    await deps.refreshTokens.revokeToken(token, client.client_id);
    noStore(res);
    res.status(200).end();
  });

  // Dynamic client registration (RFC 7591): public clients only.
  const metadataAsJson = (req: Request, _res: Response, next: NextFunction) => {
    if (!req.is("application/json"))
      throw new OAuthError("invalid_client_metadata", "Send the client metadata as application/json");
    next();
  };
  router.post(
    OAUTH_PATHS.register,
    metadataAsJson,
    jsonBody,
    storable("invalid_client_metadata"),
    async (req, res) => {
      await deps.registrationLimits?.attempt(req.ip ?? req.socket.remoteAddress ?? "unknown");
      const registered = await deps.clients.register(req.body);
      deps.metrics?.oauthRegistrations.inc({ kind: "dynamic", outcome: "accepted" });
      noStore(res);
      res.status(201).json(registered);
    },
  );
  router.use(OAUTH_PATHS.register, (err: unknown, req: Request, _res: Response, next: NextFunction) => {
    // A body that is no JSON object (unreadable, too deep, too large) is metadata RFC 7591 refuses too.
    const failed = fromFramework(err, req) ?? err;
    const unreadable =
      failed instanceof ValidationFailed ||
      (failed instanceof AppError && failed.code === "payload_too_large");
    const refusal = unreadable
      ? new OAuthError(
          "invalid_client_metadata",
          `The client metadata is not a readable JSON object: ${failed.message}`,
        )
      : err;
    const outcome = registrationRefusal(refusal);
    if (outcome) deps.metrics?.oauthRegistrations.inc({ kind: "dynamic", outcome });
    next(refusal);
  });

  return router;
}

/** The `reason` a refused token request is counted under: the OAuth error answered, else what kind of failure. */
function tokenRefusal(err: unknown): OAuthTokenRefusal {
  if (err instanceof OAuthError)
    return (OAUTH_TOKEN_REFUSALS as readonly string[]).includes(err.oauthCode)
      ? (err.oauthCode as OAuthTokenRefusal)
      : "invalid_request";
  if (err instanceof AppError && err.code === "service_unavailable") return "temporarily_unavailable";
  const status = (err as { status?: unknown } | null)?.status;
  return typeof status === "number" && status < 500 ? "invalid_request" : "server_error";
}

/**
 * How a refused registration is counted: `limited` by the registration limits (per address, the cap of
 * unused registrations, Redis unable to count), `refused` for metadata the client got wrong, nothing for
 * a failure of the gateway's own.
 */
function registrationRefusal(err: unknown): "refused" | "limited" | undefined {
  if (err instanceof AppError && ["rate_limited", "service_unavailable"].includes(err.code)) return "limited";
  if (err instanceof AppError) return "refused";
  const status = (err as { status?: unknown } | null)?.status;
  return typeof status === "number" && status < 500 ? "refused" : undefined;
}

/** Whether every string in `value` (a query or a body, to any depth) can be stored as text. */
function allStorable(value: unknown): boolean {
  if (typeof value === "string") return value.isWellFormed() && !value.includes("\u0000");
  if (Array.isArray(value)) return value.every(allStorable);
  if (value && typeof value === "object")
    return Object.entries(value).every(([k, v]) => allStorable(k) && allStorable(v));
  return true;
}

const nameOf = (pending: Pick<PendingAuthorization, "clientName" | "clientId">) =>
  pending.clientName ?? pending.clientId;

/** The principal a signed-in key stands for: its owner, with its permissions. */
const principalOf = (key: ApiKeyRecord): Principal => ({
  org: key.org,
  user: key.owner,
  keyId: key.id,
  permissions: key.permissions,
  credential: "api_key",
  onBehalfOf: false,
  endUser: false,
});

/** The principal of a provider's subject acting through the organization's key, as a token of theirs would be. */
const endUserOf = (key: ApiKeyRecord, sub: string): Principal => ({
  org: key.org,
  user: sub,
  keyId: key.id,
  permissions: [MCP_CALL],
  credential: "jwt",
  onBehalfOf: false,
  endUser: sub !== key.owner,
});

function tokenResponse(accessToken: string, refreshToken: string, expiresIn: number, scope: string) {
  return {
    access_token: accessToken,
    token_type: "Bearer",
    expires_in: expiresIn,
    refresh_token: refreshToken,
    scope,
  };
}
