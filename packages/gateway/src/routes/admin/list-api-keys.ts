import { principalOf } from "@gw/core/http";
import { orgIdSchema } from "@gw/core/principal";
import { validate } from "@gw/core/validation";
import type { Router } from "express";
import { z } from "zod";
import type { ApiKeyStore } from "../../api-keys/store.ts";
import { type ApiKeyView, toView } from "../../api-keys/types.ts";
import { assertOwnOrg } from "./api-key-admin.ts";

export interface ListApiKeysResponse {
  object: "list";
  /** Each with `lastUsedAt`: when it last authenticated a request (to the minute), or `null`. */
  data: (ApiKeyView & { lastUsedAt: string | null })[];
}

export const listApiKeysQuery = z.object({ org: orgIdSchema.optional() });

/** `GET /api/v1/admin/api-keys?org=ORG`: the organization's keys, oldest first, without secrets. */
export function registerListApiKeys(router: Router, store: ApiKeyStore): void {
  router.get("/admin/api-keys", async (req, res) => {
    const org = validate("query", listApiKeysQuery, req.query).org ?? principalOf(res).org;
    assertOwnOrg(res, org);
    const records = await store.listByOrg(org);
    const used = await store.lastUsed(records.map((r) => r.id));
    const body: ListApiKeysResponse = {
      object: "list",
      data: records.map((r) => ({ ...toView(r), lastUsedAt: used.get(r.id) ?? null })),
    };
    res.json(body);
  });
}
