import { principalOf, type ResourceAuthorization, requirePermission, validate } from "@gw/core";
import type { Router } from "express";
import { roleChangeSchema } from "./role-change.ts";

/**
 * `POST /api/v1/authorization/llm/revoke` → 204, whether or not the user held
 * the role. Only an owner may revoke; the last owner cannot be removed (409).
 */
export function registerRevoke(router: Router, authorization: ResourceAuthorization): void {
  router.post("/authorization/llm/revoke", requirePermission("authorization:write"), async (req, res) => {
    const change = validate("body", roleChangeSchema, req.body);
    await authorization.revoke(principalOf(res), {
      type: change.resourceType,
      id: change.resourceId,
      userId: change.userId,
      role: change.role,
    });
    res.status(204).end();
  });
}
