import type { Router } from "express";
import type { AuthorizationRouteDeps } from "./deps.ts";
import { registerRoleChange } from "./role-change.ts";

/**
 * `POST /api/v1/authorization/llm/grant` → 204. Only an owner of the resource
 * may grant; the user ends up with exactly this one role.
 */
export function registerGrant(router: Router, deps: AuthorizationRouteDeps): void {
  registerRoleChange(router, "grant", deps);
}
