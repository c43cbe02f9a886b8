import {
  type ConsistencyTokens,
  deleteExpiredResource,
  FULLY_CONSISTENT,
  isFailedPrecondition,
  isInvalidArgument,
  type SpiceDBClient,
  serviceIssuedDelete,
  unscopedId,
  v1,
} from "@gw/core/authz";
import type { Clock } from "@gw/core/clock";
import type { Logger } from "@gw/core/logger";
import type { Postgres } from "@gw/core/postgres";
import type { RedisClient } from "@gw/core/redis";
import { issuedAt } from "../ids.ts";
import { Periodic } from "./periodic.ts";

/** Key of the advisory lock that lets one replica at a time reconcile ("gw:orphans"). */
export const RECONCILE_LOCK = 0x67776f72;
/** Where the scan stands between runs, shared by the replicas: `{type, cursor}`. */
export const RECONCILE_POSITION_KEY = "gw:reconcile:position";
/** SpiceDB deletes in flight at once. */
const SPICEDB_CONCURRENCY = 8;

/**
 * The service-issued types and the table holding each one's content (names
 * are ours, never input). Of files, only the ids the service issues are its
 * own: other backends register theirs, which have no row here.
 */
export const RECONCILED_CONTENT = [
  { type: "conversation", table: "conversations" },
  { type: "response", table: "responses" },
  { type: "completion", table: "chat_completions" },
  { type: "file", table: "files" },
  { type: "vector_store", table: "vector_stores" },
  { type: "guardrail", table: "guardrails" },
] as const;
type Kind = (typeof RECONCILED_CONTENT)[number];

export interface ReconcileOptions {
  /** `ORPHAN_RECONCILE_INTERVAL`, in milliseconds: how often a run starts. */
  intervalMs: number;
  /** `ORPHAN_RECONCILE_BATCH`: relationships read per run, at most. */
  batch: number;
  /** `ORPHAN_RECONCILE_GRACE`, in milliseconds: a resource younger than this may still be being created and is left alone. */
  graceMs: number;
}

/** What one run did. */
export interface ReconcileReport {
  type: Kind["type"];
  /** Relationships read. */
  read: number;
  /** Resources whose relationships were removed: they had no content. */
  removed: number;
  /** Whether the scan of this type reached its end (the next run starts the next type). */
  wrapped: boolean;
}

interface Position {
  type: Kind["type"];
  cursor?: string;
}

/**
 * Removes the relationships of service-issued resources (conversations,
 * responses, chat completions, files, vector stores, guardrails) that have no content in PostgreSQL: what a
 * create leaves when its process dies between writing the owner relationship
 * and the row, or when both its row and the compensating delete failed.
 * Every `intervalMs` one replica (an advisory lock) reads the next `batch`
 * relationships of one type from SpiceDB, from where the last run stopped
 * (SpiceDB's cursor, kept in Redis), asks PostgreSQL in one query which of
 * their resources have a row, and deletes every relationship of the others,
 * unless their id says they were issued less than `graceMs` ago (a model
 * call may be writing them). At the end of a type it goes on to the next,
 * so a full pass takes about (relationships / batch) runs; the cost of one
 * run is bounded by `batch`: one read, one query, at most `batch` deletes.
 */
export class OrphanReconciler extends Periodic {
  private readonly db: Postgres;
  private readonly redis: RedisClient;
  private readonly spicedb: SpiceDBClient;
  private readonly tokens: ConsistencyTokens;
  private readonly logger: Logger;
  private readonly clock: Clock;
  private readonly options: ReconcileOptions;

  constructor(deps: {
    db: Postgres;
    redis: RedisClient;
    spicedb: SpiceDBClient;
    tokens: ConsistencyTokens;
    logger: Logger;
    /** Its wall time decides what is expired. */
    clock: Clock;
    options: ReconcileOptions;
  }) {
    super(deps.options.intervalMs, (err) =>
      deps.logger.warn({ err: err.message }, "orphan reconcile failed; retried next interval"),
    );
    this.db = deps.db;
    this.redis = deps.redis;
    this.spicedb = deps.spicedb;
    this.tokens = deps.tokens;
    this.logger = deps.logger;
    this.clock = deps.clock;
    this.options = deps.options;
  }

  protected runOnce() {
    return this.reconcile();
  }

  /** One run now; `undefined` if another replica is running one. */
  async reconcile(): Promise<ReconcileReport | undefined> {
    return this.db.withAdvisoryLock(RECONCILE_LOCK, async () => {
      const position = await this.position();
      const kind = RECONCILED_CONTENT.find((k) => k.type === position.type) ?? RECONCILED_CONTENT[0];
      const page = await this.read(kind, position.cursor);
      const report: ReconcileReport = {
        type: kind.type,
        read: page.relationships.length,
        removed: await this.removeOrphans(kind, page.relationships),
        wrapped: page.relationships.length < this.options.batch,
      };
      const next: Position = report.wrapped
        ? {
            type: RECONCILED_CONTENT[(RECONCILED_CONTENT.indexOf(kind) + 1) % RECONCILED_CONTENT.length]!
              .type,
          }
        : { type: kind.type, ...(page.cursor ? { cursor: page.cursor } : {}) };
      await this.redis.set(RECONCILE_POSITION_KEY, JSON.stringify(next));
      if (report.removed > 0) this.logger.info(report, "relationships without content removed");
      return report;
    });
  }

  private async position(): Promise<Position> {
    const kept = await this.redis.get(RECONCILE_POSITION_KEY);
    try {
      const parsed = kept ? (JSON.parse(kept) as Position) : undefined;
      if (parsed && RECONCILED_CONTENT.some((k) => k.type === parsed.type)) return parsed;
    } catch {
      // an unreadable position starts over
    }
    return { type: RECONCILED_CONTENT[0].type };
  }

  /** The next `batch` relationships of the type after `cursor`; from the start if SpiceDB no longer takes the cursor. */
  private async read(
    kind: Kind,
    cursor: string | undefined,
  ): Promise<{ relationships: v1.Relationship[]; cursor?: string }> {
    const request = (after: string | undefined) =>
      v1.ReadRelationshipsRequest.create({
        consistency: FULLY_CONSISTENT,
        relationshipFilter: v1.RelationshipFilter.create({ resourceType: kind.type }),
        optionalLimit: this.options.batch,
        ...(after ? { optionalCursor: v1.Cursor.create({ token: after }) } : {}),
      });
    let results: v1.ReadRelationshipsResponse[];
    try {
      results = await this.spicedb.readRelationships(request(cursor));
    } catch (err) {
      if (!cursor || !(isInvalidArgument(err) || isFailedPrecondition(err))) throw err;
      results = await this.spicedb.readRelationships(request(undefined));
    }
    const last = results.at(-1)?.afterResultCursor?.token;
    return {
      relationships: results.flatMap((r) => (r.relationship ? [r.relationship] : [])),
      ...(last ? { cursor: last } : {}),
    };
  }

  /** Deletes every relationship of the resources among `relationships` that have no row and are past the grace. */
  private async removeOrphans(kind: Kind, relationships: v1.Relationship[]): Promise<number> {
    const now = this.clock.wall();
    const candidates = new Map<string, { org: string; id: string }>();
    for (const relationship of relationships) {
      const objectId = relationship.resource?.objectId;
      if (!objectId || candidates.has(objectId)) continue;
      const { org, id } = unscopedId(objectId);
      if (!serviceIssuedDelete(kind.type, id)) continue; // another backend's (a registered file)
      const issued = issuedAt(id, now);
      if (issued !== undefined && issued > now - this.options.graceMs) continue; // maybe still being created
      candidates.set(objectId, { org, id });
    }
    if (candidates.size === 0) return 0;
    const resources = [...candidates.values()];
    const { rows } = await this.db.query<{ org: string; id: string }>(
      `SELECT x.org, x.id FROM unnest($1::text[], $2::text[]) AS x(org, id)
        WHERE EXISTS (SELECT 1 FROM ${kind.table} t WHERE t.org = x.org AND t.id = x.id)`,
      [resources.map((r) => r.org), resources.map((r) => r.id)],
    );
    const live = new Set(rows.map((r) => `${r.org}\u0000${r.id}`));
    const orphans = resources.filter((r) => !live.has(`${r.org}\u0000${r.id}`));
    let next = 0;
    const worker = async () => {
      while (next < orphans.length) {
        const { org, id } = orphans[next++]!;
        const failed = await deleteExpiredResource(this.spicedb, this.tokens, org, { type: kind.type, id });
        if (failed)
          this.logger.warn(
            { err: failed.message },
            "could not record the delete of an orphan's relationships as its last write",
          );
      }
    };
    await Promise.all(Array.from({ length: Math.min(SPICEDB_CONCURRENCY, orphans.length) }, worker));
    return orphans.length;
  }
}
