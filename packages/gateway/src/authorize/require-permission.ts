import { forbidden, type Permission } from "@gw/core";
import type { RequestHandler } from "express";
import { principalOf } from "../principal/resolve-principal.ts";

/** Endpoint-level check: the credential must carry `permission`. */
export function requirePermission(permission: Permission): RequestHandler {
  return (_req, res, next) => {
    if (!principalOf(res).permissions.includes(permission)) {
      throw forbidden(`This credential lacks the '${permission}' permission`);
    }
    next();
  };
}
