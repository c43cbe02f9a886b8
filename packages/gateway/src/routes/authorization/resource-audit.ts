import { NotResourceOwner } from "@gw/core/authz";
import { principalOf, requirePermission } from "@gw/core/http";
import { validate } from "@gw/core/validation";
import type { Router } from "express";
import { z } from "zod";
import { AUDIT_CURSOR } from "../../audit/audit-log.ts";
import { measured } from "../../audit/audited.ts";
import type { AuthorizationRouteDeps } from "./deps.ts";
import { pageQuery, resourcePathSchema } from "./resource-params.ts";

/** Audit listings: newest first, `limit` 1 to 100 (default 20), `cursor` the last id of the previous page. */
export const auditQuery = z.object(
  pageQuery(20, 100, z.string().regex(AUDIT_CURSOR, "Value error, invalid cursor")),
);

/**
 * `GET /api/v1/authorization/llm/resources/{resourceType}/{resourceId}/audit`:
 * the resource's audit trail, for its owners.
 */
export function registerResourceAudit(router: Router, deps: AuthorizationRouteDeps): void {
  router.get(
    "/authorization/llm/resources/:resourceType/:resourceId/audit",
    requirePermission("authorization:read"),
    async (req, res) => {
      const { resourceType, resourceId } = validate("path", resourcePathSchema, req.params);
      const page = validate("query", auditQuery, req.query);
      const principal = principalOf(res);
      const resource = { type: resourceType, id: resourceId };
      const body = await measured(deps.metrics, "audit", async () => {
        if (!(await deps.authorization.check(principal, resource, "owner"))) throw new NotResourceOwner();
        return deps.audit.forResource(principal.org, resource, page);
      });
      res.json(body);
    },
  );
}
