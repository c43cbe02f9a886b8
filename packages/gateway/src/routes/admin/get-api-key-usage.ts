import type { CountingWindows } from "@gw/core/windows";
import type { Router } from "express";
import { keyUsage } from "../../api-keys/key-usage.ts";
import type { OrgLimitsStore } from "../../api-keys/org-limits.ts";
import type { ApiKeyStore } from "../../api-keys/store.ts";
import { ownOrgKey } from "./api-key-admin.ts";

/**
 * `GET /api/v1/admin/api-keys/{id}/usage?user=U`: where every window of every
 * unit of the key (and with `user`, of that end user) stands now, as
 * `pnpm keys usage` shows it; spend in dollars.
 */
export function registerGetApiKeyUsage(
  router: Router,
  deps: { store: ApiKeyStore; budgets: Pick<CountingWindows, "peek">; orgLimits: OrgLimitsStore },
): void {
  router.get("/admin/api-keys/:id/usage", async (req, res) => {
    const key = await ownOrgKey(deps.store, res, req.params.id);
    const user =
      typeof req.query.user === "string" && req.query.user !== "" ? req.query.user.slice(0, 256) : undefined;
    res.json(await keyUsage(deps.budgets, deps.orgLimits, key, user));
  });
}
