import { RESOURCE_TYPES } from "@gw/core/authz";
import { forbidden } from "@gw/core/errors";
import { principalOf } from "@gw/core/http";
import { userIdSchema } from "@gw/core/principal";
import { validate } from "@gw/core/validation";
import type { Router } from "express";
import { z } from "zod";
import { AUDIT_ACTIONS, type AuditLog } from "../../audit/audit-log.ts";
import { measured } from "../../audit/audited.ts";
import type { GatewayMetrics } from "../../metrics.ts";
import { auditQuery } from "../authorization/resource-audit.ts";
import { resourceIdSchema } from "../authorization/role-change.ts";

/** The organization's trail: a page, narrowed by actor, resource, action and time. */
export const orgAuditQuery = auditQuery.extend({
  actor: userIdSchema.optional(),
  resourceType: z.enum(RESOURCE_TYPES).optional(),
  resourceId: resourceIdSchema.optional(),
  action: z.enum(AUDIT_ACTIONS).optional(),
  since: z.iso.datetime({ offset: true }).optional(),
  until: z.iso.datetime({ offset: true }).optional(),
});

/**
 * `GET /api/v1/admin/audit?limit&cursor&actor&resourceType&resourceId&action&since&until`
 * (`admin:api-keys` or `admin:console`): the audit trail of the admin key's
 * whole organization, newest first; `since` and `until` are RFC 3339 instants.
 */
export function registerListAudit(
  router: Router,
  deps: { audit: AuditLog; metrics: Pick<GatewayMetrics, "authorizationOperations"> },
): void {
  router.get("/admin/audit", async (req, res) => {
    const { permissions } = principalOf(res);
    if (!permissions.includes("admin:api-keys") && !permissions.includes("admin:console"))
      throw forbidden("This credential lacks the 'admin:api-keys' or 'admin:console' permission");
    const { limit, cursor, actor, resourceType, resourceId, action, since, until } = validate(
      "query",
      orgAuditQuery,
      req.query,
    );
    const body = await measured(deps.metrics, "audit", () =>
      deps.audit.forOrganization(
        principalOf(res).org,
        { limit, cursor },
        {
          actor,
          resourceType,
          resourceId,
          action,
          since: since ? new Date(since) : undefined,
          until: until ? new Date(until) : undefined,
        },
      ),
    );
    res.json(body);
  });
}
