import { AUDIT_ACTIONS, AUDIT_RESOURCE_TYPES, type AuditLog } from "@gw/core/audit";
import { defineRoute } from "@gw/core/http";
import { userIdSchema } from "@gw/core/principal";
import { dateTimeSchema } from "@gw/core/rfc3339";
import { z } from "zod";
import { measured } from "../../audit/audited.ts";
import type { GatewayMetrics } from "../../metrics.ts";
import { auditPage, auditQuery } from "../authorization/resource-audit.ts";
import { TAG } from "./schemas.ts";

/**
 * The organization's trail: a page, narrowed by actor, resource, action and
 * time. A resource id names a resource only with its type: alone it is
 * refused (422 at `resourceId`), never silently ignored. The user and
 * resource ids are printable ASCII characters, so no filter holds U+0000.
 */
export const orgAuditQuery = auditQuery
  .extend({
    actor: userIdSchema.optional(),
    // Whatever a record can be about: the user acted as (`user`), a provider key, the identity provider too.
    resourceType: z.enum(AUDIT_RESOURCE_TYPES).optional(),
    // A user's id may hold spaces, which no other resource's does: an id no record has matches nothing.
    resourceId: userIdSchema.optional(),
    action: z.enum(AUDIT_ACTIONS).optional(),
    since: dateTimeSchema().optional(),
    until: dateTimeSchema().optional(),
  })
  .superRefine((query, ctx) => {
    if (query.resourceId !== undefined && query.resourceType === undefined)
      ctx.addIssue({
        code: "custom",
        path: ["resourceId"],
        input: query.resourceId,
        message: "Value error, resourceId needs resourceType: an id names a resource only with its type",
      });
  });

/**
 * `GET /api/v1/admin/audit?limit&cursor&actor&resourceType&resourceId&action&since&until`
 * (`admin:api-keys` or `admin:console`): the audit trail of the admin key's
 * whole organization, newest first; `since` and `until` are RFC 3339 instants.
 */
export const listAudit = defineRoute({
  method: "GET",
  path: "/api/v1/admin/audit",
  operationId: "listAudit",
  summary: "The organization's audit trail, newest first, narrowed by actor, resource, action and time",
  tag: TAG,
  permission: ["admin:api-keys", "admin:console"],
  query: orgAuditQuery,
  responses: { 200: { description: "A page of audit records", schema: auditPage } },
  handler: (
    { principal, query },
    deps: { audit: AuditLog; metrics: Pick<GatewayMetrics, "authorizationOperations"> },
  ) => {
    const { limit, cursor, actor, resourceType, resourceId, action, since, until } = query;
    return measured(deps.metrics, "audit", () =>
      deps.audit.forOrganization(
        principal.org,
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
  },
});
