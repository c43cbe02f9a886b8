import { defineRoute } from "@gw/core/http";
import { objectSchema, stringSchema } from "@gw/core/openapi";
import { measured } from "../../audit/audited.ts";
import { type AuthorizationRouteDeps, TAG } from "./deps.ts";
import { resourcePathSchema } from "./resource-params.ts";

export interface ListGrantsResponse {
  data: { userId: string; role: string; expiresAt?: string }[];
}

/** Who holds which role on a resource: the owners' list and the administrators' read answer alike. */
export const GRANTS_RESPONSE = {
  description: "The grants; `*` is everyone in the organization",
  schema: objectSchema({
    data: {
      type: "array",
      items: objectSchema(
        {
          userId: stringSchema(),
          role: stringSchema(),
          expiresAt: { type: "string", format: "date-time" },
        },
        { optional: ["expiresAt"] },
      ),
    },
  }),
};

/**
 * `GET /api/v1/authorization/llm/resources/{resourceType}/{resourceId}/grants`:
 * who holds which role, for owners only; ids as the caller knows them, `*`
 * for everyone in the organization.
 */
export const listGrants = defineRoute({
  method: "GET",
  path: "/api/v1/authorization/llm/resources/:resourceType/:resourceId/grants",
  operationId: "listGrants",
  summary: "Who holds which role on a resource (owners only)",
  tag: TAG,
  permission: "authorization:read",
  params: resourcePathSchema,
  responses: { 200: GRANTS_RESPONSE },
  handler: async ({ principal, params }, deps: AuthorizationRouteDeps) => {
    const grants = await measured(deps.metrics, "grants", () =>
      deps.authorization.grants(principal, { type: params.resourceType, id: params.resourceId }),
    );
    const body: ListGrantsResponse = {
      data: grants.map((g) => ({
        userId: g.userId,
        role: g.role,
        ...(g.expiresAt ? { expiresAt: g.expiresAt.toISOString() } : {}),
      })),
    };
    return body;
  },
});
