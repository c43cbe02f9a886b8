import { defineRoute } from "@gw/core/http";
import { objectSchema, stringSchema } from "@gw/core/openapi";
import type { CountingWindows } from "@gw/core/windows";
import { z } from "zod";
import { keyUsage } from "../../api-keys/key-usage.ts";
import type { OrgLimitsStore } from "../../api-keys/org-limits.ts";
import type { ApiKeyStore } from "../../api-keys/store.ts";
import { ownOrgKey } from "./api-key-admin.ts";
import { TAG } from "./schemas.ts";

/** What the usage route needs: the keys, the windows as they stand, the organization's end-user defaults. */
export interface KeyUsageDeps {
  store: ApiKeyStore;
  budgets: Pick<CountingWindows, "peek">;
  orgLimits: OrgLimitsStore;
}

/**
 * `GET /api/v1/admin/api-keys/{id}/usage?user=U`: where every window of every
 * unit of the key (and with `user`, of that end user) stands now, as
 * `pnpm keys usage` shows it; spend in dollars. `user` is read leniently:
 * cut to 256 characters, ignored unless one string.
 */
export const getApiKeyUsage = defineRoute({
  method: "GET",
  path: "/api/v1/admin/api-keys/:id/usage",
  operationId: "getApiKeyUsage",
  summary: "Where every window of every unit of a key (and with `user`, of that end user) stands now",
  tag: TAG,
  permission: "admin:api-keys",
  query: z.object({ user: z.string().max(256).optional() }),
  queryValidation: { byHandler: true },
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
  handler: async ({ params, req, res }, deps: KeyUsageDeps) => {
    const key = await ownOrgKey(deps.store, res, params.id!);
    const raw = req.query.user;
    const user = typeof raw === "string" && raw !== "" ? raw.slice(0, 256) : undefined;
    return keyUsage(deps.budgets, deps.orgLimits, key, user);
  },
});
