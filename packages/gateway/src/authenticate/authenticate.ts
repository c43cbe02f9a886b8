import { unauthorized } from "@gw/core";
import type { RequestHandler } from "express";
import type { ApiKeyLookup } from "../api-keys/lookup.ts";
import { unusableReason } from "../api-keys/types.ts";

const BEARER = /^Bearer +([A-Za-z0-9._~+/=-]+) *$/i;

/**
 * Step 1 of every API request: prove who is calling. Sets `res.locals.apiKey`.
 * Every failure is a 401 with `WWW-Authenticate: Bearer`.
 */
export function authenticate(keys: ApiKeyLookup): RequestHandler {
  return async (req, res, next) => {
    const header = req.get("authorization");
    if (!header) throw unauthorized("Missing Authorization header");
    const match = BEARER.exec(header);
    if (!match?.[1]) throw unauthorized("Authorization header must be 'Bearer <credential>'");
    const record = await keys.findBySecret(match[1]);
    if (!record) throw unauthorized("Invalid API key");
    const reason = unusableReason(record);
    if (reason) throw unauthorized(reason);
    res.locals.apiKey = record;
    next();
  };
}
