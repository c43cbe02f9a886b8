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
  data: ApiKeyView[];
}

export const listApiKeysQuery = z.object({ org: orgIdSchema.optional() });

/** `GET /api/v1/admin/api-keys?org=ORG`: the organization's keys, oldest first, without secrets. */
export function registerListApiKeys(router: Router, store: ApiKeyStore): void {
  router.get("/admin/api-keys", async (req, res) => {
    const org = validate("query", listApiKeysQuery, req.query).org ?? principalOf(res).org;
    assertOwnOrg(res, org);
    const body: ListApiKeysResponse = { object: "list", data: (await store.listByOrg(org)).map(toView) };
    res.json(body);
  });
}
