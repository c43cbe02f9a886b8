import type { CountingWindows } from "@gw/core/windows";
import type { Router } from "express";
import { patchUnits } from "../../api-keys/limits.ts";
import type { OrgLimitsStore } from "../../api-keys/org-limits.ts";
import type { ApiKeyStore } from "../../api-keys/store.ts";
import { ownOrgKey } from "./api-key-admin.ts";

export interface ApiKeyUsageResponse {
  id: string;
  user?: string;
  windows: {
    scope: string;
    unit: string;
    window: string;
    limit: number;
    used: number;
    remaining: number;
    resetsInSeconds: number;
  }[];
}

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
    // An end user's windows are the key's own `endUser` ones over the organization's defaults.
    const endUser = patchUnits(
      user === undefined ? {} : await deps.orgLimits.get(key.org),
      key.limits.endUser as Record<string, unknown> | undefined,
    );
    const windows = await deps.budgets.peek(key.id, user, { ...key.limits, endUser });
    const body: ApiKeyUsageResponse = {
      id: key.id,
      ...(user === undefined ? {} : { user }),
      windows: windows.map((w) => ({
        scope: w.scope,
        unit: w.unit,
        window: w.window,
        limit: w.limit,
        used: w.used,
        remaining: w.remaining,
        resetsInSeconds: Math.ceil(w.resetMs / 1000),
      })),
    };
    res.json(body);
  });
}
