import { principalOf } from "@gw/core/http";
import type { UnitLimits } from "@gw/core/limits";
import type { Router } from "express";
import type { OrgLimitsStore } from "../../api-keys/org-limits.ts";

export interface EndUserLimitsResponse {
  org: string;
  /** Limits of each end user of the organization's keys, where a key's own `endUser` sets none for that window. */
  endUser: UnitLimits;
}

/** `GET /api/v1/admin/end-user-limits`: the admin key's organization's defaults for end users. */
export function registerGetEndUserLimits(router: Router, orgLimits: OrgLimitsStore): void {
  router.get("/admin/end-user-limits", async (_req, res) => {
    const org = principalOf(res).org;
    const body: EndUserLimitsResponse = { org, endUser: await orgLimits.get(org) };
    res.json(body);
  });
}
