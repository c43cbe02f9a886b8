import { RESOURCE_TYPES, ROLES } from "@gw/core/authz";
import { principalOf, requirePermission } from "@gw/core/http";
import { validate } from "@gw/core/validation";
import type { Router } from "express";
import { z } from "zod";
import { measured } from "../../audit/audited.ts";
import type { AuthorizationRouteDeps } from "./deps.ts";
import { resourceIdSchema } from "./role-change.ts";

export interface CheckResponse {
  allowed: boolean;
}

export const checkQuery = z.object({
  resourceType: z.enum(RESOURCE_TYPES),
  resourceId: resourceIdSchema,
  role: z.enum(ROLES),
});

/** `GET /api/v1/authorization/llm/check?resourceType&resourceId&role`: for the principal; unknown resources are `false`. */
export function registerCheck(router: Router, deps: AuthorizationRouteDeps): void {
  router.get("/authorization/llm/check", requirePermission("authorization:read"), async (req, res) => {
    const { resourceType, resourceId, role } = validate("query", checkQuery, req.query);
    const body: CheckResponse = {
      allowed: await measured(
        deps.metrics,
        "check",
        () => deps.authorization.check(principalOf(res), { type: resourceType, id: resourceId }, role),
        (allowed) => (allowed ? "allowed" : "denied"),
      ),
    };
    res.json(body);
  });
}
