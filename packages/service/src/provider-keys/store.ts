import { type AuditLog, auditIntent } from "@gw/core/audit";
import type { Clock } from "@gw/core/clock";
import { type Sealed, type UpstreamPolicy, type Vault, VaultUnreadable } from "@gw/core/mcp";
import type { Postgres, Queryable } from "@gw/core/postgres";
import { Agent, buildConnector, type Dispatcher } from "undici";
import type {
  ByokProvider,
  OrganizationProviderKey,
  OrganizationProviderKeys,
  ProviderKeyCaller,
} from "../llm/provider-keys.ts";

/** What the API shows of an organization's provider key: never the key, only its last four characters. */
export interface ProviderKeyView {
  object: "provider.credential";
  provider: ByokProvider;
  api_key_last4: string;
  base_url: string | null;
  /** Unix seconds. */
  created_at: number;
  /** When it was last stored (Unix seconds). */
  updated_at: number;
  /** The first model call made with the key as last stored (Unix seconds); null until then. */
  first_used_at: number | null;
}

interface Row {
  provider: ByokProvider;
  base_url: string | null;
  api_key_last4: string;
  kek_id: string;
  wrapped_key: Buffer;
  sealed: Buffer;
  revision: string;
  created_at: string;
  updated_at: string;
  first_used_at: string | null;
}

const VIEW_COLUMNS = "provider, base_url, api_key_last4, created_at, updated_at, first_used_at";

export interface ProviderKeyStoreOptions {
  /** Its wall time stamps keys and their first use. */
  clock: Clock;
  /** Where an organization's `base_url` may point, checked when stored and on every connection. */
  policy: UpstreamPolicy;
  /** Time allowed to open a connection to an organization's `base_url`, in milliseconds. */
  connectTimeoutMs: number;
  /** Told when a key cannot be opened (a vault key gone from VAULT_KEYS, or tampered): never the key. */
  onUnreadable?: (found: { org: string; provider: ByokProvider; reason: string }) => void;
  /** For tests: runs after `keyFor` read the key, before it writes anything (its re-wrap, its first use). */
  afterRead?: () => Promise<void>;
}

/**
 * Organizations' own provider keys (BYOK) in PostgreSQL (`provider_keys`),
 * one per organization and provider, sealed by the vault with the
 * organization, the provider and the `base_url` they go to. Each store and
 * delete is written with its audit record in one transaction; each first use
 * after a store is audited once, by whichever replica claims it (a
 * conditional update of `first_used_at` in the same transaction as its
 * record). Keys leave this class only through `keyFor`.
 */
export class ProviderKeyStore implements OrganizationProviderKeys {
  private readonly db: Postgres;
  private readonly vault: Vault;
  private readonly audit: AuditLog;
  private readonly options: ProviderKeyStoreOptions;
  private endpointDispatcher: Agent | undefined;

  constructor(db: Postgres, vault: Vault, audit: AuditLog, options: ProviderKeyStoreOptions) {
    this.db = db;
    this.vault = vault;
    this.audit = audit;
    this.options = options;
  }

  /** The rules an organization's `base_url` is held to (checked by the route before `put`). */
  get policy(): UpstreamPolicy {
    return this.options.policy;
  }

  /** Stores (or replaces) the organization's key for `provider`, with its audit record. */
  async put(
    actor: ProviderKeyCaller,
    provider: ByokProvider,
    input: { apiKey: string; baseUrl: string | null },
  ): Promise<ProviderKeyView> {
    const { org } = actor.principal;
    const sealed = this.vault.seal(input.apiKey, context(org, provider, input.baseUrl));
    const now = this.seconds();
    return this.db.transaction(async (tx) => {
      const { rows } = await tx.query<Row>(
        `INSERT INTO provider_keys AS k
           (org, provider, base_url, api_key_last4, kek_id, wrapped_key, sealed, revision,
            created_at, updated_at, first_used_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, 1, $8, $8, NULL)
         ON CONFLICT (org, provider) DO UPDATE SET base_url = $3, api_key_last4 = $4, kek_id = $5,
           wrapped_key = $6, sealed = $7, revision = k.revision + 1, updated_at = $8, first_used_at = NULL
         RETURNING ${VIEW_COLUMNS}`,
        [
          org,
          provider,
          input.baseUrl,
          input.apiKey.slice(-4),
          sealed.kekId,
          sealed.wrappedKey,
          sealed.sealed,
          now,
        ],
      );
      await this.audit.record(auditIntent(actor, "store", "provider_key", provider), "allowed", tx);
      return view(rows[0]!);
    });
  }

  /** The organization's keys as the API shows them, by provider. */
  async list(org: string): Promise<ProviderKeyView[]> {
    const { rows } = await this.db.query<Row>(
      `SELECT ${VIEW_COLUMNS} FROM provider_keys WHERE org = $1 ORDER BY provider`,
      [org],
    );
    return rows.map(view);
  }

  /** Deletes the organization's key for `provider`, with its audit record; false when none was stored. */
  async delete(actor: ProviderKeyCaller, provider: ByokProvider): Promise<boolean> {
    return this.db.transaction(async (tx) => {
      const { rowCount } = await tx.query("DELETE FROM provider_keys WHERE org = $1 AND provider = $2", [
        actor.principal.org,
        provider,
      ]);
      if (!rowCount) return false;
      await this.audit.record(auditIntent(actor, "delete", "provider_key", provider), "allowed", tx);
      return true;
    });
  }

  /** See `OrganizationProviderKeys.keyFor`: the contract the router relies on. */
  async keyFor(
    caller: ProviderKeyCaller,
    provider: ByokProvider,
  ): Promise<OrganizationProviderKey | undefined> {
    const { org } = caller.principal;
    const { rows } = await this.db.query<Row>(
      `SELECT provider, base_url, kek_id, wrapped_key, sealed, revision, updated_at, first_used_at
       FROM provider_keys WHERE org = $1 AND provider = $2`,
      [org, provider],
    );
    const row = rows[0];
    if (!row) return undefined;
    const ctx = context(org, provider, row.base_url);
    const stored: Sealed = { kekId: row.kek_id, wrappedKey: row.wrapped_key, sealed: row.sealed };
    let apiKey: string;
    try {
      apiKey = this.vault.open(stored, ctx);
    } catch (err) {
      if (!(err instanceof VaultUnreadable)) throw err;
      this.options.onUnreadable?.({ org, provider, reason: err.message });
      return undefined;
    }
    await this.options.afterRead?.();
    if (this.vault.needsRewrap(stored)) {
      const rewrapped = this.vault.rewrap(stored, ctx);
      // Only the revision it was read at: a key stored meanwhile has a data key of its own.
      await this.db.query(
        `UPDATE provider_keys SET kek_id = $4, wrapped_key = $5
         WHERE org = $1 AND provider = $2 AND revision = $3`,
        [org, provider, row.revision, rewrapped.kekId, rewrapped.wrappedKey],
      );
    }
    if (row.first_used_at === null) await this.claimFirstUse(caller, provider, row.revision);
    return {
      apiKey,
      ...(row.base_url ? { endpoint: { baseUrl: row.base_url, dispatcher: this.dispatcher() } } : {}),
      changedAt: new Date(Number(row.updated_at) * 1000).toISOString(),
    };
  }

  /**
   * Marks the revision used and audits it, once across replicas: the update
   * holds only while `first_used_at` is unset for that very revision, and the
   * record is written in its transaction (a second claimant's update waits
   * for the first's commit, then matches nothing).
   */
  private async claimFirstUse(caller: ProviderKeyCaller, provider: ByokProvider, revision: string) {
    await this.db.transaction(async (tx: Queryable) => {
      const { rowCount } = await tx.query(
        `UPDATE provider_keys SET first_used_at = $4
         WHERE org = $1 AND provider = $2 AND revision = $3 AND first_used_at IS NULL`,
        [caller.principal.org, provider, revision, this.seconds()],
      );
      if (rowCount)
        await this.audit.record(auditIntent(caller, "first_use", "provider_key", provider), "allowed", tx);
    });
  }

  /** One pool for every organization's `base_url`: each new connection checked and pinned by the policy. */
  private dispatcher(): Dispatcher {
    this.endpointDispatcher ??= new Agent({
      connect: this.options.policy.guard(
        buildConnector({ lookup: this.options.policy.lookup(), timeout: this.options.connectTimeoutMs }),
      ),
      keepAliveTimeout: 60_000,
    });
    return this.endpointDispatcher;
  }

  async close(): Promise<void> {
    await this.endpointDispatcher?.close();
  }

  private seconds(): number {
    return Math.floor(this.options.clock.wall() / 1000);
  }
}

/** What the key is sealed for: it opens for this organization, provider and address only. */
const context = (org: string, provider: ByokProvider, baseUrl: string | null) => [
  "provider.key",
  org,
  provider,
  baseUrl ?? "",
];

function view(row: Row): ProviderKeyView {
  return {
    object: "provider.credential",
    provider: row.provider,
    api_key_last4: row.api_key_last4,
    base_url: row.base_url,
    created_at: Number(row.created_at),
    updated_at: Number(row.updated_at),
    first_used_at: row.first_used_at === null ? null : Number(row.first_used_at),
  };
}
