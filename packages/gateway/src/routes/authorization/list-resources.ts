import { principalOf, RESOURCE_TYPES, ROLES, requirePermission, validate } from "@gw/core";
import type { Router } from "express";
import { z } from "zod";
import { measured } from "../../audit/audited.ts";
import type { AuthorizationRouteDeps } from "./deps.ts";
import { pageQuery } from "./resource-params.ts";

export interface ListResourcesResponse {
  data: { resourceId: string }[];
  next_cursor: string | null;
}

const query = z.object({
  resourceType: z.enum(RESOURCE_TYPES),
  role: z.enum(ROLES).default("reader"),
  ...pageQuery(100, 1000),
});

/**
 * `GET /api/v1/authorization/llm/resources?resourceType&role&limit&cursor`:
 * what the principal may see, from SpiceDB's LookupResources. `role` is the
 * minimum (`reader` lists everything readable); pages follow SpiceDB's cursor
 * until `next_cursor` is null.
 */
export function registerListResources(router: Router, deps: AuthorizationRouteDeps): void {
  router.get("/authorization/llm/resources", requirePermission("authorization:read"), async (req, res) => {
    const { resourceType, role, limit, cursor } = validate("query", query, req.query);
    const page = await measured(deps.metrics, "lookup", () =>
      deps.authorization.lookup(principalOf(res), resourceType, role, { limit, cursor }),
    );
    const body: ListResourcesResponse = {
      data: page.resourceIds.map((resourceId) => ({ resourceId })),
      next_cursor: page.nextCursor,
    };
    res.json(body);
  });
}
