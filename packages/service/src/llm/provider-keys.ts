import type { Principal } from "@gw/core/principal";
import type { Dispatcher } from "undici";

/**
 * The provider kinds an organization may store its own key for
 * (`PUT /api/v1/providers/credentials/{provider}`): a catalogue deployment
 * marked `byok: true` of one of these kinds uses the calling organization's
 * key for it.
 */
export const BYOK_PROVIDERS = ["openai", "azure", "anthropic"] as const;
export type ByokProvider = (typeof BYOK_PROVIDERS)[number];

/** Whose call is about to use an organization's key: the audit record of its first use names them. */
export interface ProviderKeyCaller {
  principal: Pick<Principal, "org" | "user" | "keyId" | "credential">;
  /** The request the call serves (an eval run: its run's id), as the audit record names it. */
  requestId: string;
}

/** An organization's own key for one provider, opened for one call. */
export interface OrganizationProviderKey {
  /** The secret: send it to the provider as that kind sends keys (`Authorization: Bearer`, `api-key`, `x-api-key`), nowhere else. */
  apiKey: string;
  /**
   * Where the organization's key goes instead of the deployment's `base_url`,
   * when it named one, with the only dispatcher that may connect there: every
   * new connection is checked and pinned as MCP upstreams are (https, public
   * addresses only, the checked address used: no SSRF, no DNS rebinding).
   * Never send a request to `baseUrl` through any other dispatcher.
   */
  endpoint?: { baseUrl: string; dispatcher: Dispatcher };
  /** When the organization last stored it (RFC 3339): a call made with another `changedAt` used another key. */
  changedAt: string;
}

/**
 * The organizations' own provider keys, as the router uses them. The one
 * place a stored key is opened; the service's `ProviderKeyStore`
 * (`provider-keys/store.ts`) implements it.
 *
 * Contract:
 * - `keyFor(caller, provider)` gives the calling organization's key for
 *   `provider`, or `undefined` when it stored none (or its key cannot be
 *   opened: a vault key gone from `VAULT_KEYS`, which is logged without the
 *   secret). `undefined` means: skip every `byok: true` deployment of that
 *   kind for this call, as if it were cooling down; never fall back to the
 *   deployment's own `api_key` for it.
 * - Call it for the deployment about to be tried, right before its attempt
 *   (not to look over candidates): it is what counts as using the key. The
 *   first call after each store of the key writes one `first_use` audit
 *   record (actor: `caller`), exactly once across every replica, before it
 *   returns; if that record cannot be written the call rejects (a 503 on a
 *   PostgreSQL outage) and the key is not handed out.
 * - Only `caller.principal.org`'s key is ever returned: the organization is
 *   the principal's, never one taken from the request.
 * - One indexed PostgreSQL read per call (plus a write on a first use, or
 *   when an older vault key sealed it: it is re-wrapped under the active
 *   one). Do not keep the key past the call: a `DELETE` takes effect at the
 *   next `keyFor`.
 * - The key never goes into a log line, an error, a span attribute, a
 *   metric label or anything the client sees; a provider's error text that
 *   could echo it goes through `redactProviderText(text, [apiKey])`.
 * - Calls it paid for are recorded with `ownKey: true` (`UsageEvent`).
 */
export interface OrganizationProviderKeys {
  keyFor(caller: ProviderKeyCaller, provider: ByokProvider): Promise<OrganizationProviderKey | undefined>;
}
