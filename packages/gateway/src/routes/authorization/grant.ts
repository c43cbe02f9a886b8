import { principalOf, type ResourceAuthorization, requirePermission, validate } from "@gw/core";
import type { Router } from "express";
import { roleChangeSchema } from "./role-change.ts";

/**
 * `POST /api/v1/authorization/llm/grant` → 204. Only an owner of the resource
 * may grant; the user ends up with exactly this one role.
 */
export function registerGrant(router: Router, authorization: ResourceAuthorization): void {
  router.post("/authorization/llm/grant", requirePermission("authorization:write"), async (req, res) => {
    const change = validate("body", roleChangeSchema, req.body);
    await authorization.grant(principalOf(res), {
      type: change.resourceType,
      id: change.resourceId,
      userId: change.userId,
      role: change.role,
    });
    res.status(204).end();
  });
}
