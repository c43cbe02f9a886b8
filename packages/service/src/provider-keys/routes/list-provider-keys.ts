import { defineRoute } from "@gw/core/http";
import { ok } from "../../http/schemas.ts";
import { type ProviderKeyRouteDeps, providerKeyListSchema, TAG } from "./schemas.ts";

/**
 * `GET /api/v1/providers/credentials` (`admin:api-keys` or `admin:console`,
 * as the audit trail: the console shows them): the organization's keys, by
 * provider, each with its last four characters and dates, never the key.
 */
export const listProviderKeys = defineRoute({
  method: "GET",
  path: "/api/v1/providers/credentials",
  operationId: "listProviderCredentials",
  summary: "The organization's own provider keys: the last four characters and dates, never a key",
  tag: TAG,
  permission: ["admin:api-keys", "admin:console"],
  responses: ok("The organization's provider keys", providerKeyListSchema),
  handler: async ({ principal }, deps: ProviderKeyRouteDeps) => ({
    object: "list",
    data: await deps.providerKeys.list(principal.org),
  }),
});
