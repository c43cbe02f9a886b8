import { principalOf } from "@gw/core/http";
import { validate } from "@gw/core/validation";
import type { Router } from "express";
import type { OrgLimitsStore } from "../../api-keys/org-limits.ts";
import { endUserLimitsPatchSchema } from "../../api-keys/schema.ts";
import type { EndUserLimitsResponse } from "./get-end-user-limits.ts";

/**
 * `PATCH /api/v1/admin/end-user-limits`: changes the organization's defaults
 * for end users (`{"tokens":{"day":50000},"spend":{"month":null}}`: a number
 * sets a window, `null` removes it or a whole unit).
 */
export function registerUpdateEndUserLimits(router: Router, orgLimits: OrgLimitsStore): void {
  router.patch("/admin/end-user-limits", async (req, res) => {
    const patch = validate("body", endUserLimitsPatchSchema, req.body);
    const org = principalOf(res).org;
    const body: EndUserLimitsResponse = { org, endUser: await orgLimits.update(org, patch) };
    res.json(body);
  });
}
