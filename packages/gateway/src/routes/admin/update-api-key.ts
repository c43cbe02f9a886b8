import type { Clock } from "@gw/core/clock";
import { validate } from "@gw/core/validation";
import type { Router } from "express";
import { updateApiKeyBody } from "../../api-keys/schema.ts";
import type { ApiKeyStore } from "../../api-keys/store.ts";
import { type ApiKeyView, toView } from "../../api-keys/types.ts";
import { ownOrgKey } from "./api-key-admin.ts";

export type UpdateApiKeyResponse = ApiKeyView;

/** `PATCH /api/v1/admin/api-keys/{id}`: name, permissions, limits (`null` removes a window), expiry. */
export function registerUpdateApiKey(router: Router, store: ApiKeyStore, clock: Clock): void {
  const schema = updateApiKeyBody(clock);
  router.patch("/admin/api-keys/:id", async (req, res) => {
    const patch = validate("body", schema, req.body);
    const existing = await ownOrgKey(store, res, req.params.id);
    const updated = await store.update(existing.id, patch);
    if (!updated) throw new Error(`API key ${existing.id} vanished during update`);
    const body: UpdateApiKeyResponse = toView(updated);
    res.json(body);
  });
}
