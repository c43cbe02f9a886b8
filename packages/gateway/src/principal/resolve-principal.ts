import { ON_BEHALF_OF_HEADER, type Principal, parseOnBehalfOf } from "@gw/core";
import type { RequestHandler, Response } from "express";
import type { ApiKeyRecord } from "../api-keys/types.ts";

declare global {
  namespace Express {
    interface Locals {
      apiKey?: ApiKeyRecord;
      principal?: Principal;
    }
  }
}

/** Step 2: the principal is the key's org and either the end user named in `X-On-Behalf-Of` or the key's owner. */
export const resolvePrincipal: RequestHandler = (req, res, next) => {
  const key = res.locals.apiKey;
  if (!key) throw new Error("resolvePrincipal runs after authenticate");
  const endUser = parseOnBehalfOf(req.headers[ON_BEHALF_OF_HEADER]);
  res.locals.principal = {
    org: key.org,
    user: endUser ?? key.owner,
    keyId: key.id,
    permissions: key.permissions,
    credential: "api_key",
    onBehalfOf: endUser !== undefined,
  };
  next();
};

export function principalOf(res: Response): Principal {
  const principal = res.locals.principal;
  if (!principal) throw new Error("No principal: the route is mounted outside the authenticated router");
  return principal;
}
