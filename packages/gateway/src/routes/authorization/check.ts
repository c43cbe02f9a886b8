import {
  principalOf,
  RESOURCE_TYPES,
  type ResourceAuthorization,
  ROLES,
  requirePermission,
  validate,
} from "@gw/core";
import type { Router } from "express";
import { z } from "zod";
import { resourceIdSchema } from "./role-change.ts";

export interface CheckResponse {
  allowed: boolean;
}

const query = z.object({
  resourceType: z.enum(RESOURCE_TYPES),
  resourceId: resourceIdSchema,
  role: z.enum(ROLES),
});

/** `GET /api/v1/authorization/llm/check?resourceType&resourceId&role`: for the principal; unknown resources are `false`. */
export function registerCheck(router: Router, authorization: ResourceAuthorization): void {
  router.get("/authorization/llm/check", requirePermission("authorization:read"), async (req, res) => {
    const { resourceType, resourceId, role } = validate("query", query, req.query);
    const body: CheckResponse = {
      allowed: await authorization.check(principalOf(res), { type: resourceType, id: resourceId }, role),
    };
    res.json(body);
  });
}
