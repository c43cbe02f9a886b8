import { defineRoute } from "@gw/core/http";
import type { OrgLimitsStore } from "../../api-keys/org-limits.ts";
import { endUserLimitsPatchSchema } from "../../api-keys/schema.ts";
import type { EndUserLimitsResponse } from "./get-end-user-limits.ts";
import { endUserLimits, TAG } from "./schemas.ts";

/**
 * `PATCH /api/v1/admin/end-user-limits`: changes the organization's defaults
 * for end users (`{"tokens":{"day":50000},"spend":{"month":null}}`: a number
 * sets a window, `null` removes it or a whole unit).
 */
export const updateEndUserLimits = defineRoute({
  method: "PATCH",
  path: "/api/v1/admin/end-user-limits",
  operationId: "updateEndUserLimits",
  summary: "Change the organization's default end-user limits (a number sets a window, `null` removes it)",
  tag: TAG,
  permission: "admin:api-keys",
  body: endUserLimitsPatchSchema,
  responses: { 200: { description: "The defaults as they are now", schema: endUserLimits } },
  handler: async (
    { principal, body: patch },
    deps: { orgLimits: OrgLimitsStore },
  ): Promise<EndUserLimitsResponse> => ({
    org: principal.org,
    endUser: await deps.orgLimits.update(principal.org, patch),
  }),
});
