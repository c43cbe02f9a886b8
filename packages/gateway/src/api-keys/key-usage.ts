import type { Limits } from "@gw/core/limits";
import type { CountingWindows } from "@gw/core/windows";
import { patchUnits, withDefaultRequestWindows } from "./limits.ts";
import type { OrgLimitsStore } from "./org-limits.ts";
import type { ApiKeyRecord } from "./types.ts";

/** Where every window of a key (and, with `user`, of that end user) stands now. */
export interface ApiKeyUsage {
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
 * The key's windows without counting anything, as `GET /admin/api-keys/{id}/usage`
 * and `pnpm keys usage` show them: its request windows, or `DEFAULT_LIMITS`'
 * (`defaultLimits`) for a key with none, as the rate limit counts them; an end
 * user's windows are the key's own `endUser` ones over the organization's defaults.
 */
export async function keyUsage(
  windows: Pick<CountingWindows, "peek">,
  orgLimits: Pick<OrgLimitsStore, "get">,
  key: Pick<ApiKeyRecord, "id" | "org" | "limits">,
  user: string | undefined,
  defaultLimits: Limits,
): Promise<ApiKeyUsage> {
  const endUser = patchUnits(
    user === undefined ? {} : await orgLimits.get(key.org),
    key.limits.endUser as Record<string, unknown> | undefined,
  );
  const states = await windows.peek(key.id, user, {
    ...withDefaultRequestWindows(key.limits, defaultLimits),
    endUser,
  });
  return {
    id: key.id,
    ...(user === undefined ? {} : { user }),
    windows: states.map((w) => ({
      scope: w.scope,
      unit: w.unit,
      window: w.window,
      limit: w.limit,
      used: w.used,
      remaining: w.remaining,
      resetsInSeconds: Math.ceil(w.resetMs / 1000),
    })),
  };
}
