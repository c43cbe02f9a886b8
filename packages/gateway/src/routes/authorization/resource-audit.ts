import { AUDIT_CURSOR } from "@gw/core/audit";
import { NotResourceOwner } from "@gw/core/authz";
import { defineRoute } from "@gw/core/http";
import { type JsonSchema, objectSchema } from "@gw/core/openapi";
import { z } from "zod";
import { measured } from "../../audit/audited.ts";
import { type AuthorizationRouteDeps, TAG } from "./deps.ts";
import { pageQuery, resourcePathSchema } from "./resource-params.ts";

/** Audit listings: newest first, `limit` 1 to 100 (default 20), `cursor` the last id of the previous page. */
export const auditQuery = z.object(
  pageQuery(
    20,
    100,
    // Refused as a lookup's cursor is (`value_error`, "invalid cursor"); the document still shows its form.
    z
      .string()
      .refine((cursor) => AUDIT_CURSOR.test(cursor), "Value error, invalid cursor")
      .meta({ pattern: AUDIT_CURSOR.source }),
  ),
);

/** A page of audit records, as the OpenAPI document shows it (the organization's trail too). */
export const auditPage: JsonSchema = objectSchema(
  {
    data: { type: "array", items: { type: "object", description: "One audit record" } },
    next_cursor: { type: ["string", "null"] },
  },
  { open: true },
);

/**
 * `GET /api/v1/authorization/llm/resources/{resourceType}/{resourceId}/audit`:
 * the resource's audit trail, for its owners.
 */
export const resourceAudit = defineRoute({
  method: "GET",
  path: "/api/v1/authorization/llm/resources/:resourceType/:resourceId/audit",
  operationId: "listResourceAudit",
  summary: "A resource's audit trail, newest first (owners only)",
  tag: TAG,
  permission: "authorization:read",
  params: resourcePathSchema,
  query: auditQuery,
  responses: { 200: { description: "A page of audit records", schema: auditPage } },
  handler: ({ principal, params, query: page }, deps: AuthorizationRouteDeps) => {
    const resource = { type: params.resourceType, id: params.resourceId };
    return measured(deps.metrics, "audit", async () => {
      if (!(await deps.authorization.check(principal, resource, "owner")))
        throw new NotResourceOwner("read its audit trail");
      return deps.audit.forResource(principal.org, resource, page);
    });
  },
});
