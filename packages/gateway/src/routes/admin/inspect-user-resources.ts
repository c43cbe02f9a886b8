import { RESOURCE_TYPES, ROLES } from "@gw/core/authz";
import { defineRoute } from "@gw/core/http";
import { objectSchema, stringSchema } from "@gw/core/openapi";
import { userIdSchema } from "@gw/core/principal";
import { queryInt } from "@gw/core/validation";
import { z } from "zod";
import { audited } from "../../audit/audited.ts";
import { TAG as AUTHORIZATION, type AuthorizationRouteDeps } from "../authorization/deps.ts";

export const inspectUserResourcesQuery = z.object({
  resourceType: z.enum(RESOURCE_TYPES),
  role: z.enum(ROLES).default("reader"),
  limit: queryInt(z.int().min(1).max(1000)).default(100),
});

export interface InspectUserResourcesResponse {
  userId: string;
  resourceType: (typeof RESOURCE_TYPES)[number];
  data: { resourceId: string }[];
  /** More than `limit` resources are readable. */
  has_more: boolean;
}

/**
 * `GET /api/v1/admin/authorization/users/{userId}/resources?resourceType&role&limit`
 * (`admin:console`): what a user of the caller's organization can read
 * (`role` the minimum) of one type, from SpiceDB's LookupResources as that
 * user. Recorded in the audit trail (`inspect`, resource id `*`, the user as
 * subject); never across organizations: the user is one of the caller's own.
 */
export const inspectUserResources = defineRoute({
  method: "GET",
  path: "/api/v1/admin/authorization/users/:userId/resources",
  operationId: "inspectUserResources",
  summary: "What a user of the organization can read of a type (administrators; recorded as `inspect`)",
  tag: AUTHORIZATION,
  permission: "admin:console",
  params: z.object({ userId: userIdSchema }),
  query: inspectUserResourcesQuery,
  responses: {
    200: {
      description: "The resources, in order of id",
      schema: objectSchema({
        userId: stringSchema(),
        resourceType: stringSchema(),
        data: { type: "array", items: objectSchema({ resourceId: stringSchema() }) },
        has_more: { type: "boolean" },
      }),
    },
  },
  handler: async ({ principal, params, query, req }, deps: AuthorizationRouteDeps) => {
    const { userId } = params;
    const { resourceType, role, limit } = query;
    const user = { ...principal, user: userId };
    let body: InspectUserResourcesResponse = { userId, resourceType, data: [], has_more: false };
    await audited(
      deps,
      { principal, requestId: req.id },
      { action: "inspect", resource: { type: resourceType, id: "*" }, subject: userId, role },
      async () => {
        const page = await deps.authorization.lookup(user, resourceType, role, { limit });
        body = {
          userId,
          resourceType,
          data: page.resourceIds.map((resourceId) => ({ resourceId })),
          has_more: page.more,
        };
        return undefined;
      },
    );
    return body;
  },
});
