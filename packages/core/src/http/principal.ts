import type { RequestHandler, Response } from "express";
import { forbidden } from "../errors.ts";
import type { Admission } from "../internal-assertion.ts";
import type { Permission } from "../permissions.ts";
import type { Principal } from "../principal.ts";

declare global {
  namespace Express {
    interface Locals {
      principal?: Principal;
      /** The key's limits as the gateway resolved them, for the admission of model calls. */
      admission?: Admission;
      /**
       * The door's check still in flight (the service's replay guard of a
       * model call, `InternalAssertions.verifyFirstUse`): a route parses and
       * validates meanwhile, and its handler runs only once it resolved.
       */
      firstUse?: Promise<void>;
    }
  }
}

/** The principal a request acts as; set by the gateway's principal step or the service's assertion check. */
export function principalOf(res: Response): Principal {
  const principal = res.locals.principal;
  if (!principal) throw new Error("No principal: the route is mounted outside the authenticated router");
  return principal;
}

/** Endpoint-level check: the credential must carry `permission`. */
export function requirePermission(permission: Permission): RequestHandler {
  return (_req, res, next) => {
    if (!principalOf(res).permissions.includes(permission)) {
      throw forbidden(`This credential lacks the '${permission}' permission`, {
        reason: "missing_permission",
      });
    }
    next();
  };
}
