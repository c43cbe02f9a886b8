import { forbidden } from "@gw/core/errors";
import { ON_BEHALF_OF_HEADER, parseOnBehalfOf } from "@gw/core/principal";
import type { RequestHandler } from "express";
import { describeOnBehalfOf, mayActFor } from "../api-keys/on-behalf-of.ts";
import type { ApiKeyRecord } from "../api-keys/types.ts";

declare global {
  namespace Express {
    interface Locals {
      apiKey?: ApiKeyRecord;
    }
  }
}

/**
 * Step 2: who the request acts as. With an API key: the key's org and either
 * the end user named in `X-On-Behalf-Of` or the key's owner. With a token:
 * its org and subject, with the token's permissions (never more than its key
 * still has); `X-On-Behalf-Of`, if sent, must name that same subject.
 * Either way the end user must be within the key's on-behalf-of policy, as
 * it is now (a token minted before the policy tightened stops working).
 */
export const resolvePrincipal: RequestHandler = (req, res, next) => {
  const key = res.locals.apiKey;
  if (!key) throw new Error("resolvePrincipal runs after authenticate");
  const endUser = parseOnBehalfOf(req.headersDistinct[ON_BEHALF_OF_HEADER]);
  const token = res.locals.token;
  if (token) {
    if (endUser !== undefined && endUser !== token.sub) {
      throw forbidden("X-On-Behalf-Of must match the token's subject");
    }
    assertMayActFor(key, token.sub, "The token's subject");
    res.locals.principal = {
      org: token.org,
      user: token.sub,
      keyId: key.id,
      permissions: token.permissions.filter((p) => key.permissions.includes(p)),
      ...(key.models ? { models: key.models } : {}),
      credential: "jwt",
      onBehalfOf: false,
      endUser: token.sub !== key.owner,
    };
    return next();
  }
  if (endUser !== undefined) assertMayActFor(key, endUser, "X-On-Behalf-Of");
  res.locals.principal = {
    org: key.org,
    user: endUser ?? key.owner,
    keyId: key.id,
    permissions: key.permissions,
    ...(key.models ? { models: key.models } : {}),
    credential: "api_key",
    onBehalfOf: endUser !== undefined,
    endUser: endUser !== undefined && endUser !== key.owner,
  };
  next();
};

/** 403 unless the key's on-behalf-of policy lets it act for `user`, named by where it came from. */
export function assertMayActFor(key: ApiKeyRecord, user: string, source: string): void {
  if (!mayActFor(key, user)) {
    throw forbidden(
      `${source} '${user}' is outside this API key's X-On-Behalf-Of policy: it may act for ${describeOnBehalfOf(key.onBehalfOf)}`,
    );
  }
}

/** Some things only the holder of an API key may do (mint tokens, manage keys): a token gets 403. */
export function requireApiKey(message: string): RequestHandler {
  return (_req, res, next) => {
    if (res.locals.principal?.credential !== "api_key") throw forbidden(message);
    next();
  };
}
