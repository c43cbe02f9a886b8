import type { Clock } from "@gw/core/clock";
import { principalOf } from "@gw/core/http";
import { validate } from "@gw/core/validation";
import type { Router } from "express";
import { createApiKeyBody } from "../../api-keys/schema.ts";
import type { ApiKeyStore } from "../../api-keys/store.ts";
import { type ApiKeyView, toView } from "../../api-keys/types.ts";
import { assertOwnOrg } from "./api-key-admin.ts";

/** The one response that ever carries the secret. */
export type CreateApiKeyResponse = ApiKeyView & { key: string };

/** `POST /api/v1/admin/api-keys` → 201. `org` defaults to the admin key's own. */
export function registerCreateApiKey(router: Router, store: ApiKeyStore, clock: Clock): void {
  const schema = createApiKeyBody(clock);
  router.post("/admin/api-keys", async (req, res) => {
    const raw = req.body;
    const withOrg =
      raw && typeof raw === "object" && !Array.isArray(raw) && !("org" in raw)
        ? { ...raw, org: principalOf(res).org }
        : raw;
    const input = validate("body", schema, withOrg);
    assertOwnOrg(res, input.org);
    const { record, secret } = await store.create(input);
    const body: CreateApiKeyResponse = { ...toView(record), key: secret };
    res.status(201).json(body);
  });
}
