import {
  type ConsistencyTokens,
  deleteExpiredResources,
  type GrantExpiries,
  type ResourceType,
  type SpiceDBClient,
} from "@gw/core/authz";
import { type Clock, retentionCutoff } from "@gw/core/clock";
import type { Logger } from "@gw/core/logger";
import type { Postgres } from "@gw/core/postgres";
import type { Files } from "../files/files.ts";
import type { VectorStores } from "../vector-stores/vector-stores.ts";
import { Periodic } from "./periodic.ts";

/** Key of the advisory lock that lets one replica at a time sweep ("gw:retention"). */
export const SWEEP_LOCK = 0x67773a72;
/** Rows per batch, their relationships deleted by one or two WriteRelationships: small enough to keep each write short, large enough to keep up. */
export const SWEEP_BATCH = 500;
/** Rows per batch with `readWholeTypes`: each batch reads its type's relationships once, whatever its size. */
export const WHOLE_TYPE_SWEEP_BATCH = 50_000;
/** Files per batch: each takes its bytes with it, up to `FILE_MAX_BYTES` a file. */
export const FILE_SWEEP_BATCH = 50;

export interface RetentionOptions {
  /** `RESPONSE_RETENTION`, in milliseconds. */
  responseRetentionMs: number;
  /** `CONVERSATION_IDLE_EXPIRY`, in milliseconds; unset: conversations stay until deleted. */
  conversationIdleExpiryMs?: number | undefined;
  /** `RETENTION_SWEEP_INTERVAL`, in milliseconds. */
  sweepIntervalMs: number;
  /**
   * Read each type's relationships whole, once per batch of
   * `WHOLE_TYPE_SWEEP_BATCH`, rather than each resource's: for the local
   * SpiceDB engine (`SPICEDB_ENDPOINT` unset), whose in-memory datastore
   * reads one resource's relationships by scanning all of its type.
   */
  readWholeTypes?: boolean;
}

/** What one sweep deleted. */
/** How long a grant's recorded end is kept after it passed. */
const EXPIRIES_KEPT_MS = 60_000;

export interface SweepReport {
  responses: number;
  completions: number;
  conversations: number;
  /** Expired files, and uploads abandoned unfinished. */
  files: number;
  /** Vector stores past their `expires_after`. */
  vectorStores: number;
  /** Recorded ends of grants now past (`GrantExpiries`), which no kept decision can reach any more. */
  grantExpiries: number;
}

/**
 * One kind of expiring content: the rows past their time, oldest first,
 * along the index on the time column, and their SpiceDB resource type.
 */
interface ExpiringTable {
  table: "responses" | "chat_completions" | "conversations";
  column: "stored_at" | "active_at";
  type: ResourceType;
}
const RESPONSES: ExpiringTable = { table: "responses", column: "stored_at", type: "response" };
const COMPLETIONS: ExpiringTable = { table: "chat_completions", column: "stored_at", type: "completion" };
const CONVERSATIONS: ExpiringTable = { table: "conversations", column: "active_at", type: "conversation" };

/**
 * Deletes expired content in the background: every `sweepIntervalMs`, each
 * replica tries an advisory lock and the one that holds it deletes, in
 * batches, the stored responses and stored chat completions older than
 * `RESPONSE_RETENTION` and the conversations idle past
 * `CONVERSATION_IDLE_EXPIRY`: first their SpiceDB relationships, a batch
 * at a time in bulk (`deleteExpiredResources`: nothing is written for a
 * deleted resource, its ZedToken goes too), then their rows (items go with their conversation or response);
 * and the files past their `expires_at` (and uploads abandoned unfinished): their relationships, then
 * what `Files.remove` removes (its listeners' data, the bytes, the record, refunded to the quota); and the
 * vector stores past their `expires_at`: their relationships, chunks and records. A
 * sweep that fails part-way leaves rows that are still expired (reads never see them) and finishes at the
 * next interval.
 */
export class RetentionSweeper extends Periodic {
  private readonly db: Postgres;
  private readonly spicedb: SpiceDBClient;
  private readonly tokens: ConsistencyTokens;
  private readonly expiries: GrantExpiries | undefined;
  private readonly logger: Logger;
  private readonly clock: Clock;
  private readonly options: RetentionOptions;
  private readonly files: Files | undefined;
  private readonly vectorStores: VectorStores | undefined;

  constructor(deps: {
    db: Postgres;
    spicedb: SpiceDBClient;
    tokens: ConsistencyTokens;
    /** Where the ends of expiring grants are recorded: those past are pruned. */
    expiries?: GrantExpiries | undefined;
    logger: Logger;
    /** Its wall time decides what is expired. */
    clock: Clock;
    options: RetentionOptions;
    /** Uploaded files, each expiring at its own time. */
    files?: Files;
    /** Vector stores, each expiring at its own time. */
    vectorStores?: VectorStores;
  }) {
    super(deps.options.sweepIntervalMs, (err) =>
      deps.logger.warn({ err: err.message }, "retention sweep failed; retried next interval"),
    );
    this.db = deps.db;
    this.spicedb = deps.spicedb;
    this.tokens = deps.tokens;
    this.expiries = deps.expiries;
    this.logger = deps.logger;
    this.clock = deps.clock;
    this.options = deps.options;
    this.files = deps.files;
    this.vectorStores = deps.vectorStores;
  }

  protected runOnce() {
    return this.sweep();
  }

  /** One sweep now; `undefined` if another replica is sweeping. */
  async sweep(): Promise<SweepReport | undefined> {
    return this.db.withAdvisoryLock(SWEEP_LOCK, async () => {
      const stored = retentionCutoff(this.clock, this.options.responseRetentionMs);
      const report: SweepReport = {
        responses: await this.sweepTable(RESPONSES, stored),
        completions: await this.sweepTable(COMPLETIONS, stored),
        conversations:
          this.options.conversationIdleExpiryMs === undefined
            ? 0
            : await this.sweepTable(
                CONVERSATIONS,
                retentionCutoff(this.clock, this.options.conversationIdleExpiryMs),
              ),
        files: await this.sweepFiles(new Date(this.clock.wall())),
        vectorStores:
          (await this.vectorStores?.sweepExpired(new Date(this.clock.wall()), (stores) =>
            this.forgetRelationships("vector_store", stores),
          )) ?? 0,
        // Kept a minute past: a check asked on a replica whose clock is a little behind still finds them.
        grantExpiries: (await this.expiries?.prune(this.clock.wall() - EXPIRIES_KEPT_MS)) ?? 0,
      };
      if (
        report.responses + report.completions + report.conversations + report.files + report.vectorStores >
        0
      )
        this.logger.info(report, "expired content deleted");
      return report;
    });
  }

  private async sweepTable(kind: ExpiringTable, cutoff: Date): Promise<number> {
    let deleted = 0;
    const batch = this.options.readWholeTypes ? WHOLE_TYPE_SWEEP_BATCH : SWEEP_BATCH;
    while (true) {
      // Table and column names are ours (above), never input; values are parameters.
      const { rows } = await this.db.query<{ org: string; id: string }>(
        `SELECT org, id FROM ${kind.table} WHERE ${kind.column} <= $1 ORDER BY ${kind.column} LIMIT $2`,
        [cutoff, batch],
      );
      if (rows.length === 0) return deleted;
      await this.forgetRelationships(kind.type, rows);
      const result = await this.db.query(
        `DELETE FROM ${kind.table} t USING unnest($1::text[], $2::text[]) AS x(org, id)
          WHERE t.org = x.org AND t.id = x.id AND t.${kind.column} <= $3`,
        [rows.map((r) => r.org), rows.map((r) => r.id), cutoff],
      );
      deleted += result.rowCount ?? 0;
      if (rows.length < batch) return deleted;
    }
  }

  private async sweepFiles(cutoff: Date): Promise<number> {
    const files = this.files;
    if (!files) return 0;
    let deleted = 0;
    while (true) {
      const rows = await files.store.expired(cutoff, FILE_SWEEP_BATCH);
      if (rows.length === 0) return deleted;
      await this.forgetRelationships("file", rows);
      deleted += await files.remove(rows, cutoff);
      if (rows.length < FILE_SWEEP_BATCH) return deleted;
    }
  }

  private async forgetRelationships(type: ResourceType, rows: { org: string; id: string }[]): Promise<void> {
    const { tokenFailure } = await deleteExpiredResources(
      this.spicedb,
      this.tokens,
      rows.map(({ org, id }) => ({ org, resource: { type, id } })),
      this.options.readWholeTypes ? type : undefined,
    );
    if (tokenFailure)
      this.logger.warn(
        { err: tokenFailure.message },
        "could not drop the ZedTokens of expired resources whose relationships were deleted",
      );
  }
}
