import { keyRefusal } from "@gw/core/key-standing";
import type { Limits } from "@gw/core/limits";
import type { OnBehalfOfPolicy } from "@gw/core/on-behalf-of";
import type { Permission } from "@gw/core/permissions";
import type { KeyCacheMode } from "@gw/core/principal";

export type ApiKeyStatus = "active" | "revoked";

/** What Redis holds for a key. The secret itself is never stored, only its SHA-256. */
export interface ApiKeyRecord {
  id: string;
  org: string;
  owner: string;
  name: string | null;
  permissions: Permission[];
  limits: Limits;
  /** The models the key may use; `null` (or absent, in records written before it existed): any the service offers. */
  models?: string[] | null;
  status: ApiKeyStatus;
  /** ISO 8601 instants. */
  createdAt: string;
  expiresAt: string | null;
  revokedAt: string | null;
  /** The secret's first characters, for people to recognise it in lists. */
  start: string;
  /** Hex SHA-256 of the secret. */
  hash: string;
  /** End users it may act for (`X-On-Behalf-Of`, token subjects); absent on keys older than the policy: `any`. */
  onBehalfOf?: OnBehalfOfPolicy;
  /** Its response cache (docs/api/cache.md); absent on keys older than the setting: `off`. */
  cache?: KeyCacheMode;
}

/**
 * A key's standing as shown: `revoked`; `expired`, past its `expiresAt` (refused as such, until its
 * expiry is moved); else `active`.
 */
export type ApiKeyViewStatus = ApiKeyStatus | "expired";

/** A key as shown to people and API clients: everything but the hash. */
export type ApiKeyView = Omit<ApiKeyRecord, "hash" | "onBehalfOf" | "cache" | "status"> & {
  status: ApiKeyViewStatus;
  onBehalfOf: OnBehalfOfPolicy;
  cache: KeyCacheMode;
};

/** A key as listed: its view with when it last authenticated a request (to the minute), or `null`. */
export type ListedApiKey = ApiKeyView & { lastUsedAt: string | null };

/** The key as shown at `now` (wall time, in milliseconds since the epoch): its status as authentication sees it then. */
export function toView(record: ApiKeyRecord, now: number): ApiKeyView {
  const { hash: _hash, ...view } = record;
  return {
    ...view,
    status: keyRefusal(record, now) ?? "active",
    onBehalfOf: record.onBehalfOf ?? "any",
    cache: record.cache ?? "off",
  };
}

/** Active and unexpired at `now` (wall time, in milliseconds since the epoch): a key a sign-in may use. */
export function keyUsable(key: ApiKeyRecord, now: number): boolean {
  return keyRefusal(key, now) === undefined;
}
