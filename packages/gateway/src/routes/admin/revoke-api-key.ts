import type { Router } from "express";
import type { ApiKeyStore } from "../../api-keys/store.ts";
import { type ApiKeyView, toView } from "../../api-keys/types.ts";
import { ownOrgKey } from "./api-key-admin.ts";

export type RevokeApiKeyResponse = ApiKeyView;

/** `DELETE /api/v1/admin/api-keys/{id}`: revokes the key (the record stays, for audit) and returns it. */
export function registerRevokeApiKey(router: Router, store: ApiKeyStore): void {
  router.delete("/admin/api-keys/:id", async (req, res) => {
    const existing = await ownOrgKey(store, res, req.params.id);
    const revoked = await store.revoke(existing.id);
    if (!revoked) throw new Error(`API key ${existing.id} vanished during revocation`);
    const body: RevokeApiKeyResponse = toView(revoked);
    res.json(body);
  });
}
