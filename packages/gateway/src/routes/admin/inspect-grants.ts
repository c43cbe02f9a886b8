import { defineRoute } from "@gw/core/http";
import { audited } from "../../audit/audited.ts";
import type { AuthorizationRouteDeps } from "../authorization/deps.ts";
import { TAG as AUTHORIZATION } from "../authorization/deps.ts";
import { GRANTS_RESPONSE, type ListGrantsResponse } from "../authorization/list-grants.ts";
import { resourcePathSchema } from "../authorization/resource-params.ts";

/**
 * `GET /api/v1/admin/authorization/resources/{resourceType}/{resourceId}/grants`
 * (`admin:console`): who holds which role on any resource of the caller's
 * organization, owner or not: the administrators' organization-wide read. It
 * changes nothing and is recorded in the audit trail (`inspect`). SpiceDB's
 * `inspect` permission decides (`spicedb/schema.zed`): the resource's
 * organization's administrators are only its own users, and ids are scoped
 * by the caller's organization, so another's resources are never read.
 */
export const inspectGrants = defineRoute({
  method: "GET",
  path: "/api/v1/admin/authorization/resources/:resourceType/:resourceId/grants",
  operationId: "inspectGrants",
  summary: "Who holds which role on any resource of the organization (administrators; recorded as `inspect`)",
  tag: AUTHORIZATION,
  permission: "admin:console",
  params: resourcePathSchema,
  responses: { 200: GRANTS_RESPONSE },
  handler: async ({ principal, params, req }, deps: AuthorizationRouteDeps) => {
    const resource = { type: params.resourceType, id: params.resourceId };
    let body: ListGrantsResponse = { data: [] };
    await audited(deps, { principal, requestId: req.id }, { action: "inspect", resource }, async () => {
      // SpiceDB decides (`inspect`): the request vouches for an administrator, as the key holds admin:console.
      const grants = await deps.authorization.inspect(principal, resource, true);
      body = {
        data: grants.map((g) => ({
          userId: g.userId,
          role: g.role,
          ...(g.expiresAt ? { expiresAt: g.expiresAt.toISOString() } : {}),
        })),
      };
      return undefined;
    });
    return body;
  },
});
