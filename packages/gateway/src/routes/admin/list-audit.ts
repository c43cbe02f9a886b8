import { principalOf } from "@gw/core/http";
import { validate } from "@gw/core/validation";
import type { Router } from "express";
import type { AuditLog } from "../../audit/audit-log.ts";
import { measured } from "../../audit/audited.ts";
import type { GatewayMetrics } from "../../metrics.ts";
import { auditQuery } from "../authorization/resource-audit.ts";

/**
 * `GET /api/v1/admin/audit?limit&cursor` (`admin:api-keys`): the audit trail
 * of the admin key's whole organization, newest first.
 */
export function registerListAudit(
  router: Router,
  deps: { audit: AuditLog; metrics: Pick<GatewayMetrics, "authorizationOperations"> },
): void {
  router.get("/admin/audit", async (req, res) => {
    const page = validate("query", auditQuery, req.query);
    const body = await measured(deps.metrics, "audit", () =>
      deps.audit.forOrganization(principalOf(res).org, page),
    );
    res.json(body);
  });
}
