import { type AuditLog, auditIntent } from "@gw/core/audit";
import type { Clock } from "@gw/core/clock";
import { type Sealed, type Vault, VaultUnreadable } from "@gw/core/mcp";
import type { Postgres } from "@gw/core/postgres";
import type { Principal } from "@gw/core/principal";
import type { OidcClient } from "./oidc.ts";

/** An organization's OpenID provider as the API shows it: never the secret, only its last 4 characters. */
export interface IdentityProviderView {
  object: "mcp_oauth.identity_provider";
  issuer: string;
  client_id: string;
  client_secret_last4: string;
  key_id: string;
  created_at: number;
  updated_at: number;
}

/** An organization's provider with its secret opened, for a sign-in. */
export interface IdentityProvider extends OidcClient {
  org: string;
  /** The organization's API key the end users act through. */
  keyId: string;
}

interface Row {
  org: string;
  issuer: string;
  client_id: string;
  client_secret_last4: string;
  kek_id: string;
  wrapped_key: Buffer;
  sealed: Buffer;
  key_id: string;
  created_at: string;
  updated_at: string;
}

const VIEW_COLUMNS = "issuer, client_id, client_secret_last4, key_id, created_at, updated_at";

/** The secret opens only for the organization, issuer and client id it was stored with. */
const context = (org: string, issuer: string, clientId: string) => [
  "oauth_identity_provider",
  org,
  issuer,
  clientId,
];

/**
 * Organizations' OpenID Connect providers for MCP clients' sign-in
 * (`oauth_identity_providers`), the client secret sealed by the vault. Each
 * store and delete is written with its audit record in one transaction.
 */
export class IdentityProviders {
  private readonly db: Postgres;
  private readonly vault: Vault;
  private readonly audit: AuditLog;
  private readonly clock: Clock;
  private readonly onUnreadable: ((org: string, reason: string) => void) | undefined;

  constructor(
    db: Postgres,
    vault: Vault,
    audit: AuditLog,
    options: { clock: Clock; onUnreadable?: (org: string, reason: string) => void },
  ) {
    this.db = db;
    this.vault = vault;
    this.audit = audit;
    this.clock = options.clock;
    this.onUnreadable = options.onUnreadable;
  }

  async put(
    actor: { principal: Principal; requestId: string },
    input: { issuer: string; clientId: string; clientSecret: string; keyId: string },
  ): Promise<IdentityProviderView> {
    const { org } = actor.principal;
    const sealed = this.vault.seal(input.clientSecret, context(org, input.issuer, input.clientId));
    const now = Math.floor(this.clock.wall() / 1000);
    return this.db.transaction(async (tx) => {
      const { rows } = await tx.query<Row>(
        `INSERT INTO oauth_identity_providers
           (org, issuer, client_id, client_secret_last4, kek_id, wrapped_key, sealed, key_id, created_at, updated_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $9)
         ON CONFLICT (org) DO UPDATE SET issuer = $2, client_id = $3, client_secret_last4 = $4, kek_id = $5,
           wrapped_key = $6, sealed = $7, key_id = $8, updated_at = $9
         RETURNING ${VIEW_COLUMNS}`,
        [
          org,
          input.issuer,
          input.clientId,
          input.clientSecret.slice(-4),
          sealed.kekId,
          sealed.wrappedKey,
          sealed.sealed,
          input.keyId,
          now,
        ],
      );
      await this.audit.record(auditIntent(actor, "store", "identity_provider", input.issuer), "allowed", tx);
      return view(rows[0]!);
    });
  }

  async get(org: string): Promise<IdentityProviderView | undefined> {
    const { rows } = await this.db.query<Row>(
      `SELECT ${VIEW_COLUMNS} FROM oauth_identity_providers WHERE org = $1`,
      [org],
    );
    return rows[0] ? view(rows[0]) : undefined;
  }

  async delete(actor: { principal: Principal; requestId: string }): Promise<boolean> {
    return this.db.transaction(async (tx) => {
      const { rows } = await tx.query<{ issuer: string }>(
        "DELETE FROM oauth_identity_providers WHERE org = $1 RETURNING issuer",
        [actor.principal.org],
      );
      if (!rows[0]) return false;
      await this.audit.record(
        auditIntent(actor, "delete", "identity_provider", rows[0].issuer),
        "allowed",
        tx,
      );
      return true;
    });
  }

  /**
   * The provider of the organization that holds MCP server `serverId`, its
   * secret opened; undefined when that organization names none (or the
   * server is unknown). A secret that no longer opens (its KEK gone from
   * `VAULT_KEYS`) is reported and throws: a sign-in must not fall back to
   * another method the organization did not choose.
   */
  async forServer(serverId: string): Promise<IdentityProvider | undefined> {
    const { rows } = await this.db.query<Row>(
      `SELECT p.org, p.issuer, p.client_id, p.kek_id, p.wrapped_key, p.sealed, p.key_id
       FROM mcp_servers s JOIN oauth_identity_providers p ON p.org = s.org WHERE s.id = $1`,
      [serverId],
    );
    const row = rows[0];
    if (!row) return undefined;
    const stored: Sealed = { kekId: row.kek_id, wrappedKey: row.wrapped_key, sealed: row.sealed };
    try {
      const clientSecret = this.vault.open(stored, context(row.org, row.issuer, row.client_id));
      return { org: row.org, issuer: row.issuer, clientId: row.client_id, clientSecret, keyId: row.key_id };
    } catch (err) {
      if (err instanceof VaultUnreadable) this.onUnreadable?.(row.org, err.message);
      throw err;
    }
  }
}

function view(row: Row): IdentityProviderView {
  return {
    object: "mcp_oauth.identity_provider",
    issuer: row.issuer,
    client_id: row.client_id,
    client_secret_last4: row.client_secret_last4,
    key_id: row.key_id,
    created_at: Number(row.created_at),
    updated_at: Number(row.updated_at),
  };
}
