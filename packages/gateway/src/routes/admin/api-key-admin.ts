import { cutText, forbidden, notFound } from "@gw/core/errors";
import { principalOf } from "@gw/core/http";
import type { Response } from "express";
import { KEY_ID } from "../../api-keys/secret.ts";
import type { ApiKeyStore } from "../../api-keys/store.ts";
import type { ApiKeyRecord } from "../../api-keys/types.ts";

/** An admin key manages its own organization's keys only. */
export function assertOwnOrg(res: Response, org: string): void {
  if (org !== principalOf(res).org) throw forbidden("An admin key manages only its own organization's keys");
}

/** How much of an id a 404 names: a key's id is 28 characters; anything longer is cut, never sent back whole. */
const SHOWN_ID_CHARS = 64;

/**
 * Another organization's key is reported as not found, so ids do not leak across organizations; so is an
 * id that cannot be a key's (`KEY_ID`), without asking the store.
 */
export async function ownOrgKey(store: ApiKeyStore, res: Response, id: string): Promise<ApiKeyRecord> {
  const record = KEY_ID.test(id) ? await store.get(id) : undefined;
  if (!record || record.org !== principalOf(res).org) {
    throw notFound(`No API key ${cutText(id, SHOWN_ID_CHARS)}`);
  }
  return record;
}
