import { randomBytes } from "node:crypto";
import type { Clock } from "@gw/core/clock";
import { mcpProxyPath } from "@gw/core/mcp";
import type { Postgres, Queryable } from "@gw/core/postgres";
import type { RefreshTokens } from "./refresh-tokens.ts";

/** One consent: a user let a client act for them on one MCP server. */
export interface ConsentGrant {
  user: string;
  clientId: string;
  resource: string;
  scope: string;
  /** Unix seconds. */
  grantedAt: number;
}

/** Consents in PostgreSQL (`oauth_grants`), the latest per user, client and server; every statement names the organization. */
/** A consent as the console lists it. */
export interface ListedGrant {
  id: string;
  userId: string;
  clientId: string;
  /** The client's name when the user consented (registered, or its metadata document's). */
  clientName: string | null;
  /** The MCP server (the resource's id), and its name while it is registered. */
  serverId: string;
  serverName: string | null;
  resource: string;
  scope: string;
  /** Unix seconds. */
  grantedAt: number;
  /** Unix seconds: when the client last obtained an access token under it; null if never. */
  lastUsedAt: number | null;
}

/** Most consents one listing returns (the newest first). */
export const MAX_LISTED_GRANTS = 500;

/** The server id in a grant's resource (a proxy URL), as a PostgreSQL pattern whose group is the id. */
const SERVER_OF_RESOURCE = `${mcpProxyPath("([^/]+)")}$`;

export class ConsentGrants {
  private readonly db: Postgres;
  private readonly clock: Clock;

  constructor(db: Postgres, clock: Clock) {
    this.db = db;
    this.clock = clock;
  }

  private now = () => Math.floor(this.clock.wall() / 1000);

  /** Records a consent (a consent given again keeps its id). */
  async record(
    org: string,
    grant: Omit<ConsentGrant, "grantedAt"> & { clientName?: string | null },
  ): Promise<void> {
    await this.db.query(
      `INSERT INTO oauth_grants (org, user_id, client_id, resource, scope, granted_at, id, client_name)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
       ON CONFLICT (org, user_id, client_id, resource)
         DO UPDATE SET scope = EXCLUDED.scope, granted_at = EXCLUDED.granted_at, client_name = EXCLUDED.client_name`,
      [
        org,
        grant.user,
        grant.clientId,
        grant.resource,
        grant.scope,
        this.now(),
        `mcpg_${randomBytes(16).toString("hex")}`,
        grant.clientName ?? null,
      ],
    );
  }

  /** The client obtained a token under the consent now (the console's "last used"). */
  async touch(org: string, user: string, clientId: string, resource: string): Promise<void> {
    await this.db.query(
      "UPDATE oauth_grants SET last_used_at = $5 WHERE org = $1 AND user_id = $2 AND client_id = $3 AND resource = $4",
      [org, user, clientId, resource, this.now()],
    );
  }

  /** The organization's consents (of one user, if named), newest first, at most `MAX_LISTED_GRANTS`. */
  async list(org: string, user?: string): Promise<ListedGrant[]> {
    const { rows } = await this.db.query<{
      id: string;
      user_id: string;
      client_id: string;
      client_name: string | null;
      resource: string;
      server_id: string | null;
      server_name: string | null;
      scope: string;
      granted_at: string;
      last_used_at: string | null;
    }>(
      `SELECT g.id, g.user_id, g.client_id, COALESCE(g.client_name, c.client_name) AS client_name, g.resource,
              substring(g.resource from $4) AS server_id, s.name AS server_name,
              g.scope, g.granted_at, g.last_used_at
         FROM oauth_grants g
         LEFT JOIN oauth_clients c ON c.client_id = g.client_id
         LEFT JOIN mcp_servers s ON s.org = g.org AND s.id = substring(g.resource from $4)
        WHERE g.org = $1 AND ($2::text IS NULL OR g.user_id = $2)
        ORDER BY g.granted_at DESC, g.id
        LIMIT $3`,
      [org, user ?? null, MAX_LISTED_GRANTS, SERVER_OF_RESOURCE],
    );
    return rows.map((r) => ({
      id: r.id,
      userId: r.user_id,
      clientId: r.client_id,
      clientName: r.client_name,
      serverId: r.server_id ?? "",
      serverName: r.server_name,
      resource: r.resource,
      scope: r.scope,
      grantedAt: Number(r.granted_at),
      lastUsedAt: r.last_used_at === null ? null : Number(r.last_used_at),
    }));
  }

  /**
   * Revokes one consent by its id: forgets it and revokes its refresh tokens
   * (their access tokens end at the next call) in one transaction; how many
   * tokens, or undefined if the organization has no consent by that id.
   */
  async revokeById(
    org: string,
    id: string,
    refreshTokens: Pick<RefreshTokens, "revokeFor">,
  ): Promise<{ revokedTokens: number } | undefined> {
    return this.db.transaction(async (tx: Queryable) => {
      const { rows } = await tx.query<{ user_id: string; client_id: string; resource: string }>(
        "DELETE FROM oauth_grants WHERE org = $1 AND id = $2 RETURNING user_id, client_id, resource",
        [org, id],
      );
      const row = rows[0];
      if (!row) return undefined;
      return {
        revokedTokens: await refreshTokens.revokeFor(org, row.user_id, row.client_id, row.resource, tx),
      };
    });
  }

  async find(
    org: string,
    user: string,
    clientId: string,
    resource: string,
  ): Promise<ConsentGrant | undefined> {
    const { rows } = await this.db.query<{ scope: string; granted_at: string }>(
      "SELECT scope, granted_at FROM oauth_grants WHERE org = $1 AND user_id = $2 AND client_id = $3 AND resource = $4",
      [org, user, clientId, resource],
    );
    const row = rows[0];
    return row
      ? { user, clientId, resource, scope: row.scope, grantedAt: Number(row.granted_at) }
      : undefined;
  }

  /** Forgets the user's consents (to one client, if named), as their tokens are revoked; how many. */
  async remove(org: string, user: string, clientId?: string): Promise<number> {
    const { rowCount } = await this.db.query(
      "DELETE FROM oauth_grants WHERE org = $1 AND user_id = $2 AND ($3::text IS NULL OR client_id = $3)",
      [org, user, clientId ?? null],
    );
    return rowCount ?? 0;
  }
}
