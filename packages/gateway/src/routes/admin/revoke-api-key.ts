import type { Clock } from "@gw/core/clock";
import { defineRoute } from "@gw/core/http";
import { apiKeyPathSchema } from "../../api-keys/schema.ts";
import type { ApiKeyStore } from "../../api-keys/store.ts";
import { type ApiKeyView, toView } from "../../api-keys/types.ts";
import { ownOrgKey } from "./api-key-admin.ts";
import { apiKeyView, TAG } from "./schemas.ts";

export type RevokeApiKeyResponse = ApiKeyView;

/** `DELETE /api/v1/admin/api-keys/{id}`: revokes the key (the record stays, for audit) and returns it. */
export const revokeApiKey = defineRoute({
  method: "DELETE",
  path: "/api/v1/admin/api-keys/:id",
  operationId: "revokeApiKey",
  summary: "Revoke a key (its record stays, for audit)",
  tag: TAG,
  permission: "admin:api-keys",
  params: apiKeyPathSchema,
  responses: { 200: { description: "The revoked key", schema: apiKeyView } },
  errors: ["not_found"],
  handler: async ({ params, res }, deps: { store: ApiKeyStore; clock: Clock }) => {
    const existing = await ownOrgKey(deps.store, res, params.id);
    const revoked = await deps.store.revoke(existing.id);
    if (!revoked) throw new Error(`API key ${existing.id} vanished during revocation`);
    const body: RevokeApiKeyResponse = toView(revoked, deps.clock.wall());
    return body;
  },
});
