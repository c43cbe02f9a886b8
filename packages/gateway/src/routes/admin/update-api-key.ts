import type { Clock } from "@gw/core/clock";
import { defineRoute } from "@gw/core/http";
import { apiKeyPathSchema, updateApiKeyBody, updateApiKeySchema } from "../../api-keys/schema.ts";
import type { ApiKeyStore } from "../../api-keys/store.ts";
import { type ApiKeyView, toView } from "../../api-keys/types.ts";
import { ownOrgKey } from "./api-key-admin.ts";
import { apiKeyView, TAG } from "./schemas.ts";

export type UpdateApiKeyResponse = ApiKeyView;

/** `PATCH /api/v1/admin/api-keys/{id}`: name, permissions, limits (`null` removes a window), expiry. */
export const updateApiKey = defineRoute({
  method: "PATCH",
  path: "/api/v1/admin/api-keys/:id",
  operationId: "updateApiKey",
  summary: "Change a key's name, permissions, limits (`null` removes a window) or expiry",
  tag: TAG,
  permission: "admin:api-keys",
  params: apiKeyPathSchema,
  body: updateApiKeySchema,
  // Expiry must lie ahead on the gateway's clock.
  bodyValidation: { schemaFor: (deps: { store: ApiKeyStore; clock: Clock }) => updateApiKeyBody(deps.clock) },
  responses: { 200: { description: "The key as it is now", schema: apiKeyView } },
  errors: ["not_found"],
  handler: async ({ params, body: patch, res }, deps: { store: ApiKeyStore; clock: Clock }) => {
    const existing = await ownOrgKey(deps.store, res, params.id);
    const updated = await deps.store.update(existing.id, patch);
    if (!updated) throw new Error(`API key ${existing.id} vanished during update`);
    const body: UpdateApiKeyResponse = toView(updated, deps.clock.wall());
    return body;
  },
});
