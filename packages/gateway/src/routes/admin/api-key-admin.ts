import { forbidden, notFound } from "@gw/core/errors";
import { principalOf } from "@gw/core/http";
import type { Response } from "express";
import type { ApiKeyStore } from "../../api-keys/store.ts";
import type { ApiKeyRecord } from "../../api-keys/types.ts";

/** An admin key manages its own organization's keys only. */
export function assertOwnOrg(res: Response, org: string): void {
  if (org !== principalOf(res).org) throw forbidden("An admin key manages only its own organization's keys");
}

/** Another organization's key is reported as not found, so ids do not leak across organizations. */
export async function ownOrgKey(store: ApiKeyStore, res: Response, id: string): Promise<ApiKeyRecord> {
  const record = await store.get(id);
  if (!record || record.org !== principalOf(res).org) throw notFound(`No API key ${id}`);
  return record;
}
