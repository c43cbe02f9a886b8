import type { Clock } from "@gw/core/clock";
import { defineRoute } from "@gw/core/http";
import { objectSchema } from "@gw/core/openapi";
import { orgIdSchema } from "@gw/core/principal";
import { z } from "zod";
import { type ApiKeyStore, listedKeys } from "../../api-keys/store.ts";
import type { ListedApiKey } from "../../api-keys/types.ts";
import { assertOwnOrg } from "./api-key-admin.ts";
import { apiKeyView, TAG } from "./schemas.ts";

export interface ListApiKeysResponse {
  object: "list";
  /** Each with `lastUsedAt`: when it last authenticated a request (to the minute), or `null`. */
  data: ListedApiKey[];
}

export const listApiKeysQuery = z.object({ org: orgIdSchema.optional() });

/** `GET /api/v1/admin/api-keys?org=ORG`: the organization's keys, oldest first, without secrets. */
export const listApiKeys = defineRoute({
  method: "GET",
  path: "/api/v1/admin/api-keys",
  operationId: "listApiKeys",
  summary: "The organization's API keys, oldest first, without secrets",
  tag: TAG,
  permission: "admin:api-keys",
  query: listApiKeysQuery,
  responses: {
    200: {
      description: "The keys",
      schema: objectSchema({
        object: { type: "string", const: "list" },
        data: { type: "array", items: apiKeyView },
      }),
    },
  },
  handler: async ({ principal, query, res }, deps: { store: ApiKeyStore; clock: Clock }) => {
    const org = query.org ?? principal.org;
    assertOwnOrg(res, org);
    const records = await deps.store.listByOrg(org);
    const body: ListApiKeysResponse = {
      object: "list",
      data: await listedKeys(deps.store, records, deps.clock.wall()),
    };
    return body;
  },
});
