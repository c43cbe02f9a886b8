import { type Clock, systemClock } from "@gw/core/clock";
import { type ErrorCause, unauthorized } from "@gw/core/errors";
import { keyRefusal } from "@gw/core/key-standing";
import type { Request, RequestHandler } from "express";
import { type ApiKeyLookup, ApiKeyStoreUnavailable } from "../api-keys/lookup.ts";
import type { ApiKeyRecord } from "../api-keys/types.ts";
import type { GatewayMetrics } from "../metrics.ts";
import type { RevokedFamilies } from "../oauth/revoked-families.ts";
import { type GatewayTokenClaims, InvalidToken, looksLikeJwt, type TokenService } from "../tokens/tokens.ts";

const BEARER = /^Bearer +([A-Za-z0-9._~+/=-]+) *$/i;

declare global {
  namespace Express {
    interface Locals {
      /** The verified claims when the credential was a gateway token. */
      token?: GatewayTokenClaims;
    }
  }
}

export interface AuthenticateOptions {
  keys: ApiKeyLookup;
  tokens: TokenService;
  /** Tokens are accepted only when addressed to this gateway (its public URL), or to what the request names (a protected resource). */
  audience: string | ((req: Request) => string[]);
  metrics: Pick<GatewayMetrics, "authentications" | "jwtVerifications">;
  /** Its wall time ends keys at their `expiresAt`. */
  clock?: Clock;
  /** Revoked OAuth authorizations: a token naming one (`sid`) is refused; without it, every such token is. */
  revokedFamilies?: Pick<RevokedFamilies, "isRevoked"> | undefined;
}

/** The cause a client is told (the body's `code`) for each way authentication fails. */
const REFUSALS = {
  missing: "missing_credential",
  ambiguous: "ambiguous_credential",
  malformed: "malformed_credential",
  invalid_token: "invalid_token",
  unknown: "invalid_api_key",
  revoked: "revoked",
  expired: "expired",
} as const satisfies Record<string, ErrorCause>;

/**
 * Step 1 of every API request: prove who is calling, with an API key or a
 * gateway token minted from one. Sets `res.locals.apiKey` (for a token: the
 * key that minted it, whose quotas and revocation apply) and
 * `res.locals.token`. Every failure is a 401 with `WWW-Authenticate: Bearer`.
 */
export function authenticate(options: AuthenticateOptions): RequestHandler {
  const { keys, tokens, audience, metrics, clock = systemClock, revokedFamilies } = options;
  const refuse = (outcome: keyof typeof REFUSALS, message: string) => {
    metrics.authentications.inc({ outcome });
    return unauthorized(message, REFUSALS[outcome]);
  };
  const lookup = <T>(promise: Promise<T>) =>
    promise.catch((err: unknown) => {
      if (err instanceof ApiKeyStoreUnavailable)
        metrics.authentications.inc({ outcome: "store_unavailable" });
      throw err;
    });
  const usable = (record: ApiKeyRecord, what: string) => {
    const refusal = keyRefusal(record, clock.wall());
    if (refusal === "revoked") throw refuse("revoked", `${what} has been revoked`);
    if (refusal === "expired") throw refuse("expired", `${what} has expired`);
  };

  return async (req, res, next) => {
    // The admin console let this request in on its session, whose key it checked just now (console/console-router.ts).
    if (res.locals.consoleSession && res.locals.apiKey) return next();
    // Node keeps only the first of repeated Authorization headers; two credentials are one too many.
    const [header, ...more] = req.headersDistinct.authorization ?? [];
    if (!header) throw refuse("missing", "Missing Authorization header");
    if (more.length > 0) throw refuse("ambiguous", "Send one Authorization header, not several");
    const credential = BEARER.exec(header)?.[1];
    if (!credential) throw refuse("malformed", "Authorization header must be 'Bearer <credential>'");

    if (looksLikeJwt(credential)) {
      let claims: GatewayTokenClaims;
      try {
        claims = await tokens.verify(credential, typeof audience === "string" ? audience : audience(req));
      } catch (err) {
        if (!(err instanceof InvalidToken)) throw err;
        metrics.jwtVerifications.inc({ outcome: err.reason });
        throw refuse("invalid_token", err.message);
      }
      const key = await lookup(keys.findById(claims.key_id));
      if (!key || key.org !== claims.org) {
        metrics.jwtVerifications.inc({ outcome: "unknown_api_key" });
        throw refuse("invalid_token", "The API key that issued this token does not exist");
      }
      usable(key, "The API key that issued this token");
      // An OAuth-issued token: its authorization may have been revoked since it was signed (every replica
      // sees the mark in Redis; Redis unable to answer is a 503, never a pass).
      if (claims.sid !== undefined && (!revokedFamilies || (await revokedFamilies.isRevoked(claims.sid)))) {
        metrics.jwtVerifications.inc({ outcome: "revoked_authorization" });
        throw refuse("revoked", "The authorization behind this token has been revoked");
      }
      metrics.jwtVerifications.inc({ outcome: "ok" });
      metrics.authentications.inc({ outcome: "ok_token" });
      res.locals.apiKey = key;
      res.locals.token = claims;
      return next();
    }

    const record = await lookup(keys.findBySecret(credential));
    if (!record) throw refuse("unknown", "Invalid API key");
    usable(record, "API key");
    metrics.authentications.inc({ outcome: "ok" });
    res.locals.apiKey = record;
    next();
  };
}
