import { defineRoute } from "@gw/core/http";
import type { Limits } from "@gw/core/limits";
import { objectSchema, stringSchema } from "@gw/core/openapi";
import type { CountingWindows } from "@gw/core/windows";
import { keyUsage } from "../../api-keys/key-usage.ts";
import type { OrgLimitsStore } from "../../api-keys/org-limits.ts";
import { apiKeyPathSchema, keyUsageQuery } from "../../api-keys/schema.ts";
import type { ApiKeyStore } from "../../api-keys/store.ts";
import { ownOrgKey } from "./api-key-admin.ts";
import { TAG } from "./schemas.ts";

/** What the usage route needs: the keys, the windows as they stand, the organization's end-user defaults, `DEFAULT_LIMITS`. */
export interface KeyUsageDeps {
  store: ApiKeyStore;
  budgets: Pick<CountingWindows, "peek">;
  orgLimits: OrgLimitsStore;
  defaultLimits: Limits;
}

/**
 * `GET /api/v1/admin/api-keys/{id}/usage?user=U`: where every window of every
 * unit of the key (and with `user`, of that end user) stands now, as
 * `pnpm keys usage` shows it; spend in dollars. `user` is an end user's id,
 * as everywhere else (1 to 256 printable ASCII characters).
 */
export const getApiKeyUsage = defineRoute({
  method: "GET",
  path: "/api/v1/admin/api-keys/:id/usage",
  operationId: "getApiKeyUsage",
  summary: "Where every window of every unit of a key (and with `user`, of that end user) stands now",
  tag: TAG,
  permission: "admin:api-keys",
  params: apiKeyPathSchema,
  query: keyUsageQuery,
  responses: {
    200: {
      description: "The key's windows; spend in dollars",
      schema: objectSchema(
        {
          id: stringSchema(),
          windows: {
            type: "array",
            items: objectSchema({
              scope: stringSchema(),
              unit: stringSchema(),
              window: stringSchema(),
              limit: { type: "number" },
              used: { type: "number" },
              remaining: { type: "number" },
              resetsInSeconds: { type: "integer" },
            }),
          },
        },
        { open: true },
      ),
    },
  },
  errors: ["not_found"],
  handler: async ({ params, query, res }, deps: KeyUsageDeps) => {
    const key = await ownOrgKey(deps.store, res, params.id);
    return keyUsage(deps.budgets, deps.orgLimits, key, query.user, deps.defaultLimits);
  },
});
