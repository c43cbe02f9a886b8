import { RESOURCE_TYPES, ROLES } from "@gw/core/authz";
import { defineRoute } from "@gw/core/http";
import { objectSchema } from "@gw/core/openapi";
import { z } from "zod";
import { measured } from "../../audit/audited.ts";
import { type AuthorizationRouteDeps, TAG } from "./deps.ts";
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
export const check = defineRoute({
  method: "GET",
  path: "/api/v1/authorization/llm/check",
  operationId: "check",
  summary: "Whether the principal holds a role on a resource",
  description: "Unknown resources are `false`. An owner passes writer and reader checks; a writer, reader.",
  tag: TAG,
  permission: "authorization:read",
  query: checkQuery,
  responses: {
    200: { description: "The decision", schema: objectSchema({ allowed: { type: "boolean" } }) },
  },
  handler: async ({ principal, query }, deps: AuthorizationRouteDeps): Promise<CheckResponse> => ({
    allowed: await measured(
      deps.metrics,
      "check",
      () =>
        deps.authorization.check(principal, { type: query.resourceType, id: query.resourceId }, query.role),
      (allowed) => (allowed ? "allowed" : "denied"),
    ),
  }),
});
