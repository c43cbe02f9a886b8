import { RESOURCE_TYPES, ROLES } from "@gw/core/authz";
import { principalOf, requirePermission } from "@gw/core/http";
import { validate } from "@gw/core/validation";
import type { Router } from "express";
import { z } from "zod";
import { measured } from "../../audit/audited.ts";
import type { AuthorizationRouteDeps } from "./deps.ts";
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
export function registerListResources(router: Router, deps: AuthorizationRouteDeps): void {
  router.get("/authorization/llm/resources", requirePermission("authorization:read"), async (req, res) => {
    const { resourceType, role, limit, cursor } = validate("query", listResourcesQuery, req.query);
    const principal = principalOf(res);
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
    res.json(body);
  });
}
