import type { AuditLog } from "@gw/core/audit";
import { forbidden } from "@gw/core/errors";
import type { Logger } from "@gw/core/logger";
import { assertMayActFor, type KeyOwners } from "@gw/core/on-behalf-of";
import { ON_BEHALF_OF_HEADER, type Principal, parseOnBehalfOf } from "@gw/core/principal";
import type { Request, RequestHandler, Response } from "express";
import type { ApiKeyRecord } from "../api-keys/types.ts";
import type { GatewayMetrics } from "../metrics.ts";

declare global {
  namespace Express {
    interface Locals {
      apiKey?: ApiKeyRecord;
      /** The request acts as a user who owns another key of the organization, named in its key's `users` (audited). */
      actsAsKeyOwner?: boolean;
    }
  }
}

/** What deciding and recording who a request acts as needs. */
export interface ActingDeps {
  /** Who owns the organization's keys: never acted for unless a key's policy names them. */
  keyOwners: KeyOwners;
  audit: AuditLog;
  metrics: Pick<GatewayMetrics, "auditWriteErrors">;
  logger: Logger;
}

/**
 * Step 2: who the request acts as. With an API key: the key's org and either
 * the end user named in `X-On-Behalf-Of` or the key's owner. With a token:
 * its org and subject, with the token's permissions (never more than its key
 * still has); `X-On-Behalf-Of`, if sent, must name that same subject.
 * Either way the end user must be within the key's on-behalf-of policy, as
 * it is now, and must not own a key of the organization unless the policy
 * names them (a token minted before either changed stops working).
 */
export function resolvePrincipal(deps: ActingDeps): RequestHandler {
  return async (req, res, next) => {
    const key = res.locals.apiKey;
    if (!key) throw new Error("resolvePrincipal runs after authenticate");
    const endUser = parseOnBehalfOf(req.headersDistinct[ON_BEHALF_OF_HEADER]);
    const token = res.locals.token;
    if (token) {
      if (endUser !== undefined && endUser !== token.sub) {
        throw forbidden("X-On-Behalf-Of must match the token's subject");
      }
      await actFor(deps, { req, res, key, credential: "jwt" }, token.sub, "The token's subject");
      res.locals.principal = {
        org: token.org,
        user: token.sub,
        keyId: key.id,
        permissions: token.permissions.filter((p) => key.permissions.includes(p)),
        ...(key.models ? { models: key.models } : {}),
        ...cacheOf(key),
        credential: "jwt",
        onBehalfOf: false,
        endUser: token.sub !== key.owner,
      };
      return next();
    }
    if (endUser !== undefined)
      await actFor(deps, { req, res, key, credential: "api_key" }, endUser, "X-On-Behalf-Of");
    res.locals.principal = {
      org: key.org,
      user: endUser ?? key.owner,
      keyId: key.id,
      permissions: key.permissions,
      ...(key.models ? { models: key.models } : {}),
      ...cacheOf(key),
      credential: "api_key",
      onBehalfOf: endUser !== undefined,
      endUser: endUser !== undefined && endUser !== key.owner,
    };
    next();
  };
}

/** The key's response cache as the principal carries it: nothing when it is off. */
const cacheOf = (key: ApiKeyRecord): Pick<Principal, "cache"> =>
  key.cache && key.cache !== "off" ? { cache: key.cache } : {};

/**
 * 403 unless `key` may act as `user` (named by where it came from); a request
 * acting as another key's owner, which only the policy's `users` allows, is
 * written to the audit trail first (`act_as_key_owner`), or refused if the
 * trail cannot take it.
 */
export async function actFor(
  deps: ActingDeps,
  request: { req: Request; res: Response; key: ApiKeyRecord; credential: Principal["credential"] },
  user: string,
  source: string,
): Promise<void> {
  const { req, res, key, credential } = request;
  const { asKeyOwner } = await assertMayActFor(key, user, source, deps.keyOwners);
  if (!asKeyOwner) return;
  try {
    await deps.audit.record(
      {
        organization: key.org,
        actor: { userId: key.owner, keyId: key.id, credential },
        action: "act_as_key_owner",
        resourceType: "user",
        resourceId: user,
        request: `${req.method} ${req.originalUrl.split("?")[0]}`,
        requestId: req.id,
      },
      "allowed",
    );
  } catch (err) {
    deps.metrics.auditWriteErrors.inc();
    deps.logger.error(
      { err: (err as Error).message, org: key.org, requestId: req.id },
      "could not record acting as a key's owner in the audit trail; the request was refused",
    );
    throw err;
  }
  res.locals.actsAsKeyOwner = true;
}

/** Some things only the holder of an API key may do (mint tokens, manage keys): a token gets 403. */
export function requireApiKey(message: string): RequestHandler {
  return (_req, res, next) => {
    if (res.locals.principal?.credential !== "api_key") throw forbidden(message);
    next();
  };
}
