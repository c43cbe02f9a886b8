import type { Clock } from "@gw/core/clock";
import type { Queryable } from "@gw/core/postgres";

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
export class ConsentGrants {
  private readonly db: Queryable;
  private readonly clock: Clock;

  constructor(db: Queryable, clock: Clock) {
    this.db = db;
    this.clock = clock;
  }

  async record(org: string, grant: Omit<ConsentGrant, "grantedAt">): Promise<void> {
    await this.db.query(
      `INSERT INTO oauth_grants (org, user_id, client_id, resource, scope, granted_at) VALUES ($1, $2, $3, $4, $5, $6)
       ON CONFLICT (org, user_id, client_id, resource) DO UPDATE SET scope = EXCLUDED.scope, granted_at = EXCLUDED.granted_at`,
      [org, grant.user, grant.clientId, grant.resource, grant.scope, Math.floor(this.clock.wall() / 1000)],
    );
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
