import type { Router } from "express";
import type { AuthorizationRouteDeps } from "./deps.ts";
import { registerRoleChange } from "./role-change.ts";

/**
 * `POST /api/v1/authorization/llm/revoke` → 204, whether or not the user held
 * the role. Only an owner may revoke; the last owner cannot be removed (409).
 */
export function registerRevoke(router: Router, deps: AuthorizationRouteDeps): void {
  registerRoleChange(router, "revoke", deps);
}
