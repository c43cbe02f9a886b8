import { AppError, unauthorized } from "@gw/core";
import type { RequestHandler } from "express";
import { type ApiKeyLookup, ApiKeyStoreUnavailable } from "../api-keys/lookup.ts";
import type { GatewayMetrics } from "../metrics.ts";

const BEARER = /^Bearer +([A-Za-z0-9._~+/=-]+) *$/i;

/**
 * Step 1 of every API request: prove who is calling. Sets `res.locals.apiKey`.
 * Every failure is a 401 with `WWW-Authenticate: Bearer`.
 */
export function authenticate(
  keys: ApiKeyLookup,
  metrics: Pick<GatewayMetrics, "authentications">,
): RequestHandler {
  const refuse = (outcome: string, message: string) => {
    metrics.authentications.inc({ outcome });
    return unauthorized(message);
  };
  return async (req, res, next) => {
    const header = req.get("authorization");
    if (!header) throw refuse("missing", "Missing Authorization header");
    const match = BEARER.exec(header);
    if (!match?.[1]) throw refuse("malformed", "Authorization header must be 'Bearer <credential>'");
    const record = await keys.findBySecret(match[1]).catch((err: unknown) => {
      if (!(err instanceof ApiKeyStoreUnavailable)) throw err;
      metrics.authentications.inc({ outcome: "store_unavailable" });
      throw new AppError("service_unavailable", "Authentication is unavailable; try again", { cause: err });
    });
    if (!record) throw refuse("unknown", "Invalid API key");
    if (record.status === "revoked") throw refuse("revoked", "API key has been revoked");
    if (record.expiresAt !== null && Date.parse(record.expiresAt) <= Date.now()) {
      throw refuse("expired", "API key has expired");
    }
    metrics.authentications.inc({ outcome: "ok" });
    res.locals.apiKey = record;
    next();
  };
}
