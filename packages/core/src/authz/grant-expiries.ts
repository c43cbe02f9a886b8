import type { Queryable } from "../postgres.ts";

/**
 * When the expiring grants written to each resource end, kept where the
 * content lives rather than in Redis: a kept check decision must not outlive
 * a grant it may rest on, but Redis should hold per-resource state only
 * while a resource is hot (docs/adr/0017-zedtokens-through-redis-outages.md).
 * Keys are the resources' token keys (`tokenKey`).
 */
export interface GrantExpiries {
  /** Records when grants about to be written to the resource end (ms since the epoch); before the write, so no decision sees the grant without it. */
  record(resourceKey: string, expiries: number[]): Promise<void>;
  /** The first recorded end of a grant on the resource after `after` (ms since the epoch), if any. */
  next(resourceKey: string, after: number): Promise<number | undefined>;
  /** Drops every end before `before` (ms since the epoch): they can no longer end a kept decision. Returns how many. */
  prune(before: number): Promise<number>;
}

/** Rows are pruned this many at a time, so one sweep never holds a long statement. */
const PRUNE_BATCH = 10_000;

/** `authz_grant_expiries` (migration 0230): one row per resource and end. */
export class PostgresGrantExpiries implements GrantExpiries {
  private readonly db: Queryable;

  constructor(db: Queryable) {
    this.db = db;
  }

  async record(resourceKey: string, expiries: number[]): Promise<void> {
    if (expiries.length === 0) return;
    await this.db.query(
      `INSERT INTO authz_grant_expiries (resource_key, expires_at)
       SELECT $1, to_timestamp(at / 1000.0) FROM unnest($2::float8[]) AS at
       ON CONFLICT DO NOTHING`,
      [resourceKey, [...new Set(expiries)]],
    );
  }

  async next(resourceKey: string, after: number): Promise<number | undefined> {
    const { rows } = await this.db.query<{ at: string | null }>(
      `SELECT (extract(epoch FROM min(expires_at)) * 1000)::float8::text AS at
       FROM authz_grant_expiries WHERE resource_key = $1 AND expires_at > to_timestamp($2 / 1000.0)`,
      [resourceKey, after],
    );
    const at = rows[0]?.at;
    return at === null || at === undefined ? undefined : Math.round(Number(at));
  }

  async prune(before: number): Promise<number> {
    let pruned = 0;
    for (;;) {
      const { rowCount } = await this.db.query(
        `DELETE FROM authz_grant_expiries WHERE ctid IN (
           SELECT ctid FROM authz_grant_expiries WHERE expires_at < to_timestamp($1 / 1000.0) LIMIT ${PRUNE_BATCH})`,
        [before],
      );
      pruned += rowCount ?? 0;
      if ((rowCount ?? 0) < PRUNE_BATCH) return pruned;
    }
  }
}
