import { RESOURCE_TYPES, ROLES } from "@gw/core/authz";
import { defineRoute } from "@gw/core/http";
import { objectSchema, stringSchema } from "@gw/core/openapi";
import { z } from "zod";
import { measured } from "../../audit/audited.ts";
import { type AuthorizationRouteDeps, TAG } from "./deps.ts";
import { pageQuery } from "./resource-params.ts";

export interface ListResourcesResponse {
  data: { resourceId: string }[];
  next_cursor: string | null;
}

export const listResourcesQuery = z.object({
  resourceType: z.enum(RESOURCE_TYPES),
  role: z.enum(ROLES).default("reader"),
  ...pageQuery(100, 1000),
});

/**
 * `GET /api/v1/authorization/llm/resources?resourceType&role&limit&cursor`:
 * what the principal may see, from SpiceDB's LookupResources, in order of
 * id. `role` is the minimum (`reader` lists everything readable); pages
 * follow `next_cursor` (after the last id shown, signed, expiring) until it
 * is null.
 */
export const listResources = defineRoute({
  method: "GET",
  path: "/api/v1/authorization/llm/resources",
  operationId: "listResources",
  summary: "The resources of a type the principal holds at least `role` on",
  description: "In order of id; follow `next_cursor` until it is null.",
  tag: TAG,
  permission: "authorization:read",
  query: listResourcesQuery,
  responses: {
    200: {
      description: "A page of resource ids",
      schema: objectSchema({
        data: { type: "array", items: objectSchema({ resourceId: stringSchema() }) },
        next_cursor: { type: ["string", "null"] },
      }),
    },
  },
  handler: async ({ principal, query }, deps: AuthorizationRouteDeps) => {
    const { resourceType, role, limit, cursor } = query;
    const binding = { org: principal.org, user: principal.user, resourceType, role, limit };
    const page = await measured(deps.metrics, "lookup", async () => {
      const after = cursor === undefined ? undefined : deps.lookupCursors.open(binding, cursor);
      return deps.authorization.lookup(principal, resourceType, role, { limit, after });
    });
    const last = page.resourceIds.at(-1);
    const body: ListResourcesResponse = {
      data: page.resourceIds.map((resourceId) => ({ resourceId })),
      next_cursor: page.more && last !== undefined ? deps.lookupCursors.issue(binding, last) : null,
    };
    return body;
  },
});
