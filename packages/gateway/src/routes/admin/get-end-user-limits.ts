import { defineRoute } from "@gw/core/http";
import type { UnitLimits } from "@gw/core/limits";
import type { OrgLimitsStore } from "../../api-keys/org-limits.ts";
import { endUserLimits, TAG } from "./schemas.ts";

export interface EndUserLimitsResponse {
  org: string;
  /** Limits of each end user of the organization's keys, where a key's own `endUser` sets none for that window. */
  endUser: UnitLimits;
}

/** `GET /api/v1/admin/end-user-limits`: the admin key's organization's defaults for end users. */
export const getEndUserLimits = defineRoute({
  method: "GET",
  path: "/api/v1/admin/end-user-limits",
  operationId: "getEndUserLimits",
  summary: "The organization's default limits for each end user of its keys",
  tag: TAG,
  permission: "admin:api-keys",
  responses: { 200: { description: "The defaults", schema: endUserLimits } },
  handler: async ({ principal }, deps: { orgLimits: OrgLimitsStore }): Promise<EndUserLimitsResponse> => ({
    org: principal.org,
    endUser: await deps.orgLimits.get(principal.org),
  }),
});
