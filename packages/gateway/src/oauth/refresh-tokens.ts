import { createHash, randomBytes, randomUUID } from "node:crypto";
import type { Clock } from "@gw/core/clock";
import type { Postgres, Queryable } from "@gw/core/postgres";
import type { RevokedFamilies } from "./revoked-families.ts";

/** What a refresh token stands for: who, through which client, for which MCP server. */
export interface RefreshGrant {
  org: string;
  user: string;
  keyId: string;
  clientId: string;
  resource: string;
  scope: string;
}

interface Row {
  family: string;
  org: string;
  user_id: string;
  key_id: string;
  client_id: string;
  resource: string;
  scope: string;
  used_at: string | null;
  revoked_at: string | null;
  expires_at: string;
}

const digest = (token: string) => createHash("sha256").update(token).digest("base64url");

/** The outcome of presenting a refresh token. */
export type Rotation =
  | { outcome: "rotated"; grant: RefreshGrant; token: string; family: string }
  /** It had been used already: the whole family is revoked now (someone holds a copy). */
  | { outcome: "reused" }
  /** Live, but issued for another resource than the one asked: not spent (RFC 8707's `invalid_target`). */
  | { outcome: "other_resource" }
  | { outcome: "invalid" };

/**
 * Rotating refresh tokens in PostgreSQL (`oauth_refresh_tokens`), kept by
 * their SHA-256. Each is used once: the first use marks it used and issues
 * its successor in one transaction; a second use of any token of a family
 * revokes every token of that family (RFC 9700 4.14.2). Every revocation
 * also marks its families in Redis (`RevokedFamilies`), in the same
 * transaction: a mark that cannot be written undoes the revocation, so the
 * access tokens of a revoked family (their `sid`) are refused at the next call.
 */
export class RefreshTokens {
  private readonly db: Postgres;
  private readonly clock: Clock;
  private readonly ttlSeconds: number;
  private readonly revoked: Pick<RevokedFamilies, "mark">;

  constructor(db: Postgres, clock: Clock, ttlSeconds: number, revoked: Pick<RevokedFamilies, "mark">) {
    this.db = db;
    this.clock = clock;
    this.ttlSeconds = ttlSeconds;
    this.revoked = revoked;
  }

  /**
   * Runs a revoking statement (`... RETURNING family`) and marks its families
   * revoked before the transaction commits; how many tokens it revoked.
   */
  private async revoking(tx: Queryable, sql: string, params: unknown[]): Promise<number> {
    const { rows } = await tx.query<{ family: string }>(sql, params);
    await this.revoked.mark(rows.map((r) => r.family));
    return rows.length;
  }

  private now = () => Math.floor(this.clock.wall() / 1000);

  /** A new token of a new family (an authorization), or of `family` (a rotation). */
  async issue(
    grant: RefreshGrant,
    family: string = randomUUID(),
    db: Pick<Postgres, "query"> = this.db,
  ): Promise<{ token: string; family: string }> {
    const token = `mcprt_${randomBytes(32).toString("base64url")}`;
    const now = this.now();
    await db.query(
      `INSERT INTO oauth_refresh_tokens
         (token_hash, family, org, user_id, key_id, client_id, resource, scope, created_at, expires_at)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`,
      [
        digest(token),
        family,
        grant.org,
        grant.user,
        grant.keyId,
        grant.clientId,
        grant.resource,
        grant.scope,
        now,
        now + this.ttlSeconds,
      ],
    );
    return { token, family };
  }

  /** Uses `token` (presented by `clientId`, for `resource` if named) once: its successor, or why not. */
  async rotate(token: string, clientId: string, resource?: string): Promise<Rotation> {
    if (token.length > 128) return { outcome: "invalid" };
    const now = this.now();
    return this.db.transaction(async (tx) => {
      // The one statement that decides which of two concurrent uses wins: only one sees used_at NULL.
      const { rows } = await tx.query<Row>(
        `UPDATE oauth_refresh_tokens SET used_at = $2
          WHERE token_hash = $1 AND client_id = $3 AND used_at IS NULL AND revoked_at IS NULL AND expires_at > $2
            AND ($4::text IS NULL OR resource = $4)
          RETURNING family, org, user_id, key_id, client_id, resource, scope, used_at, revoked_at, expires_at`,
        [digest(token), now, clientId, resource ?? null],
      );
      const row = rows[0];
      if (row) {
        const grant = grantOf(row);
        const { token: next } = await this.issue(grant, row.family, tx);
        return { outcome: "rotated", grant, token: next, family: row.family } as const;
      }
      const { rows: known } = await tx.query<
        Pick<Row, "family" | "used_at" | "resource"> & { live: boolean }
      >(
        `SELECT family, used_at, resource, (used_at IS NULL AND revoked_at IS NULL AND expires_at > $3) AS live
           FROM oauth_refresh_tokens WHERE token_hash = $1 AND client_id = $2`,
        [digest(token), clientId, now],
      );
      const found = known[0];
      // Not used, and still good: only the resource asked differed (the UPDATE asked for it).
      if (found?.live) return { outcome: "other_resource" } as const;
      if (found?.used_at != null) {
        await tx.query(
          "UPDATE oauth_refresh_tokens SET revoked_at = $2 WHERE family = $1 AND revoked_at IS NULL",
          [found.family, now],
        );
        await this.revoked.mark([found.family]);
        return { outcome: "reused" } as const;
      }
      return { outcome: "invalid" } as const;
    });
  }

  /** RFC 7009: revokes the token's family if `clientId` holds it; unknown tokens are no error. */
  async revokeToken(token: string, clientId: string): Promise<void> {
    if (token.length > 128) return;
    await this.db.transaction((tx) =>
      this.revoking(
        tx,
        `UPDATE oauth_refresh_tokens SET revoked_at = $3
          WHERE revoked_at IS NULL AND family IN
            (SELECT family FROM oauth_refresh_tokens WHERE token_hash = $1 AND client_id = $2)
          RETURNING family`,
        [digest(token), clientId, this.now()],
      ),
    );
  }

  /** Deletes tokens past their expiry (used, revoked or not: none of them can be used any more); how many. */
  async sweep(): Promise<number> {
    const { rowCount } = await this.db.query("DELETE FROM oauth_refresh_tokens WHERE expires_at <= $1", [
      this.now(),
    ]);
    return rowCount ?? 0;
  }

  /** An administrator's revocation: every live token of `user` in `org` (of one client, and one MCP server, if named); how many. Inside `db`'s transaction when given. */
  async revokeFor(
    org: string,
    user: string,
    clientId?: string,
    resource?: string,
    db: Queryable | undefined = undefined,
  ): Promise<number> {
    const run = (tx: Queryable) =>
      this.revoking(
        tx,
        `UPDATE oauth_refresh_tokens SET revoked_at = $3
          WHERE org = $1 AND user_id = $2 AND revoked_at IS NULL AND ($4::text IS NULL OR client_id = $4)
            AND ($5::text IS NULL OR resource = $5)
          RETURNING family`,
        [org, user, this.now(), clientId ?? null, resource ?? null],
      );
    return db ? run(db) : this.db.transaction(run);
  }
}

const grantOf = (row: Row): RefreshGrant => ({
  org: row.org,
  user: row.user_id,
  keyId: row.key_id,
  clientId: row.client_id,
  resource: row.resource,
  scope: row.scope,
});
