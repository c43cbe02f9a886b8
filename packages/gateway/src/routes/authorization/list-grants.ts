import { principalOf, requirePermission } from "@gw/core/http";
import { validate } from "@gw/core/validation";
import type { Router } from "express";
import { measured } from "../../audit/audited.ts";
import type { AuthorizationRouteDeps } from "./deps.ts";
import { resourcePathSchema } from "./resource-params.ts";

export interface ListGrantsResponse {
  data: { userId: string; role: string; expiresAt?: string }[];
}

/**
 * `GET /api/v1/authorization/llm/resources/{resourceType}/{resourceId}/grants`:
 * who holds which role, for owners only; ids as the caller knows them, `*`
 * for everyone in the organization.
 */
export function registerListGrants(router: Router, deps: AuthorizationRouteDeps): void {
  router.get(
    "/authorization/llm/resources/:resourceType/:resourceId/grants",
    requirePermission("authorization:read"),
    async (req, res) => {
      const { resourceType, resourceId } = validate("path", resourcePathSchema, req.params);
      const grants = await measured(deps.metrics, "grants", () =>
        deps.authorization.grants(principalOf(res), { type: resourceType, id: resourceId }),
      );
      const body: ListGrantsResponse = {
        data: grants.map((g) => ({
          userId: g.userId,
          role: g.role,
          ...(g.expiresAt ? { expiresAt: g.expiresAt.toISOString() } : {}),
        })),
      };
      res.json(body);
    },
  );
}
