import { type Clock, retentionCutoff } from "@gw/core/clock";
import { type Postgres, postgresCanHold, type Queryable } from "@gw/core/postgres";
import type { EvalResult, EvalRun, EvalSchedule, RunStatus } from "./records.ts";

export type EnqueueOutcome =
  | { outcome: "queued"; backlog: number }
  | { outcome: "busy" | "deleted" | "missing" };
export type StartOutcome = "started" | "deleted" | "interrupted" | "gone";

export interface Page<T> {
  data: T[];
  has_more: boolean;
}

export interface EvalStoreOptions {
  /** How long runs are kept after they were queued, in milliseconds (`EVAL_RUN_RETENTION`). */
  runRetentionMs: number;
  /** The newest runs kept per schedule (`EVAL_RUNS_PER_SCHEDULE`); older ones vanish from reads and are deleted. */
  runsPerSchedule: number;
  /** Its wall time expires runs. */
  clock: Clock;
  /** Test seam: called inside `createWithinCap` between counting and adding, to force an interleaving. */
  afterCount?: (org: string) => Promise<void>;
}

/** Runs deleted per statement by the sweep, and at most per firing beyond a schedule's cap. */
const SWEEP_BATCH = 1_000;
const CAP_BATCH = 100;

const DELETED_MESSAGE = "The schedule was deleted before this run started";
const INTERRUPTED_MESSAGE = "The worker running it stopped before it finished";

const RUN_COLUMNS = "id, schedule_id, status, model, created_at, started_at, completed_at, error, results";

interface RunRow {
  id: string;
  schedule_id: string;
  status: RunStatus;
  model: string | null;
  created_at: string;
  started_at: string | null;
  completed_at: string | null;
  error: string | null;
  results: EvalResult[];
}

interface ScheduleRow {
  record: Omit<EvalSchedule, "deleted_at">;
  deleted_at: string | null;
}

/**
 * Eval schedules and their runs in PostgreSQL (`eval_schedules`,
 * `eval_runs`), per organization: every statement names the organization,
 * so another organization's id is simply absent. Lists page newest first
 * along a sequence; a cursor is the id of the last item seen. Runs past
 * `EVAL_RUN_RETENTION`, or older than a schedule's newest
 * `EVAL_RUNS_PER_SCHEDULE`, vanish from reads at once and are deleted in
 * batches (`sweep`, and on each firing for its schedule).
 */
export class EvalStore {
  private readonly db: Postgres;
  private readonly options: EvalStoreOptions;
  private readonly clock: Clock;

  constructor(db: Postgres, options: EvalStoreOptions) {
    this.db = db;
    this.options = options;
    this.clock = options.clock;
  }

  /**
   * Adds the schedule unless the organization already has `max` live ones:
   * false then. Creates of one organization take its advisory lock for their
   * transaction, so counting and adding are one step.
   */
  async createWithinCap(org: string, schedule: EvalSchedule, max: number): Promise<boolean> {
    const { deleted_at: _, ...record } = schedule;
    return this.db.transaction(async (tx) => {
      await lockOrganization(tx, org);
      const { rows } = await tx.query<{ n: string }>(
        "SELECT count(*) AS n FROM eval_schedules WHERE org = $1 AND deleted_at IS NULL",
        [org],
      );
      await this.options.afterCount?.(org);
      if (Number(rows[0]!.n) >= max) return false;
      await tx.query("INSERT INTO eval_schedules (org, id, record, creator) VALUES ($1, $2, $3, $4)", [
        org,
        schedule.id,
        JSON.stringify(record),
        schedule.creator.user,
      ]);
      return true;
    });
  }

  /** Undoes a creation that could not be scheduled. */
  async remove(org: string, id: string): Promise<void> {
    await this.db.query("DELETE FROM eval_schedules WHERE org = $1 AND id = $2", [org, id]);
  }

  /** The schedule, deleted or not; undefined if this organization has none with this id. */
  async get(org: string, id: string): Promise<EvalSchedule | undefined> {
    const { rows } = await this.db.query<ScheduleRow>(
      "SELECT record, deleted_at FROM eval_schedules WHERE org = $1 AND id = $2",
      [org, id],
    );
    return rows[0] && toSchedule(rows[0]);
  }

  /**
   * True if this call deleted it; false if it did not exist, was already
   * deleted, or (with `creator`) was created by someone else.
   */
  async softDelete(org: string, id: string, at: number, creator?: string): Promise<boolean> {
    const { rowCount } = await this.db.query(
      `UPDATE eval_schedules SET deleted_at = $3
        WHERE org = $1 AND id = $2 AND deleted_at IS NULL AND ($4::text IS NULL OR creator = $4)`,
      [org, id, at, creator ?? null],
    );
    return rowCount === 1;
  }

  /**
   * The organization's live schedules (with `creator`, only those that user
   * created), newest first; null if `after` names none of them.
   */
  async list(
    org: string,
    limit: number,
    after?: string,
    creator?: string,
  ): Promise<Page<EvalSchedule> | null> {
    const values: unknown[] = [org, limit + 1];
    let where = "org = $1 AND deleted_at IS NULL";
    if (creator !== undefined) {
      values.push(creator);
      where += ` AND creator = $${values.length}`;
    }
    if (after !== undefined) {
      if (!postgresCanHold(after)) return null;
      const { rows } = await this.db.query<{ seq: string }>(
        "SELECT seq FROM eval_schedules WHERE org = $1 AND id = $2 AND ($3::text IS NULL OR creator = $3)",
        [org, after, creator ?? null],
      );
      if (!rows[0]) return null;
      values.push(rows[0].seq);
      where += ` AND seq < $${values.length}`;
    }
    const { rows } = await this.db.query<ScheduleRow>(
      `SELECT record, deleted_at FROM eval_schedules WHERE ${where} ORDER BY seq DESC LIMIT $2`,
      values,
    );
    return { data: rows.slice(0, limit).map(toSchedule), has_more: rows.length > limit };
  }

  /**
   * Queues a run for a firing, unless the schedule is gone or already has a
   * run waiting to start; `backlog` counts the organization's runs now
   * waiting, this one included. The schedule's runs beyond its cap go.
   */
  async enqueue(org: string, scheduleId: string, runId: string, at: number): Promise<EnqueueOutcome> {
    return this.db.transaction(async (tx) => {
      // One organization's firings one at a time, so each backlog figure counts the ones before it.
      await lockOrganization(tx, org);
      // Held until commit: a soft delete waits for this firing, or this firing sees the delete.
      const { rows } = await tx.query<{ deleted_at: string | null }>(
        "SELECT deleted_at FROM eval_schedules WHERE org = $1 AND id = $2 FOR SHARE",
        [org, scheduleId],
      );
      if (!rows[0]) return { outcome: "missing" };
      if (rows[0].deleted_at !== null) return { outcome: "deleted" };
      const inserted = await tx.query(
        `INSERT INTO eval_runs (org, id, schedule_id, status, created_at) VALUES ($1, $2, $3, 'queued', $4)
         ON CONFLICT (org, schedule_id) WHERE status = 'queued' DO NOTHING`,
        [org, runId, scheduleId, at],
      );
      if (inserted.rowCount !== 1) return { outcome: "busy" };
      await tx.query(
        `DELETE FROM eval_runs WHERE org = $1 AND schedule_id = $2 AND status NOT IN ('queued', 'running')
           AND id IN (SELECT id FROM eval_runs WHERE org = $1 AND schedule_id = $2
                      ORDER BY seq DESC OFFSET $3 LIMIT $4)`,
        [org, scheduleId, this.options.runsPerSchedule, CAP_BATCH],
      );
      const backlog = await tx.query<{ n: string }>(
        "SELECT count(*) AS n FROM eval_runs WHERE org = $1 AND status = 'queued'",
        [org],
      );
      return { outcome: "queued", backlog: Number(backlog.rows[0]!.n) };
    });
  }

  /**
   * Marks a queued run running, unless its schedule was deleted (decided
   * with the schedule's row locked, so no run starts after a delete has
   * answered); the schedule comes with `started`. A run found running was
   * interrupted (its worker died).
   */
  async start(
    org: string,
    scheduleId: string,
    runId: string,
    at: number,
  ): Promise<{ outcome: Exclude<StartOutcome, "started"> } | { outcome: "started"; schedule: EvalSchedule }> {
    return this.db.transaction(async (tx) => {
      const run = await tx.query<{ status: RunStatus }>(
        "SELECT status FROM eval_runs WHERE org = $1 AND id = $2 FOR UPDATE",
        [org, runId],
      );
      const status = run.rows[0]?.status;
      const end = (error: string) =>
        tx.query(
          "UPDATE eval_runs SET status = 'failed', completed_at = $3, error = $4 WHERE org = $1 AND id = $2",
          [org, runId, at, error],
        );
      if (status === "running") {
        await end(INTERRUPTED_MESSAGE);
        return { outcome: "interrupted" };
      }
      if (status !== "queued") return { outcome: "gone" };
      const schedule = await tx.query<ScheduleRow>(
        "SELECT record, deleted_at FROM eval_schedules WHERE org = $1 AND id = $2 FOR SHARE",
        [org, scheduleId],
      );
      if (!schedule.rows[0] || schedule.rows[0].deleted_at !== null) {
        await end(DELETED_MESSAGE);
        return { outcome: "deleted" };
      }
      await tx.query("UPDATE eval_runs SET status = 'running', started_at = $3 WHERE org = $1 AND id = $2", [
        org,
        runId,
        at,
      ]);
      return { outcome: "started", schedule: toSchedule(schedule.rows[0]) };
    });
  }

  /** Ends a queued run that could not be handed to the queue, so the schedule's next firing is not skipped. */
  async abandon(org: string, _scheduleId: string, runId: string, at: number, error: string): Promise<void> {
    await this.db.query(
      "UPDATE eval_runs SET status = 'failed', completed_at = $3, error = $4 WHERE org = $1 AND id = $2",
      [org, runId, at, error],
    );
  }

  /** Records what a run has produced so far (and its model), or how it ended. */
  async update(
    org: string,
    runId: string,
    fields: {
      model?: string;
      results?: EvalResult[];
      end?: { status: Extract<RunStatus, "completed" | "failed">; at: number; error: string | null };
    },
  ): Promise<void> {
    const values: unknown[] = [org, runId];
    const sets: string[] = [];
    const set = (column: string, value: unknown) => {
      values.push(value);
      sets.push(`${column} = $${values.length}`);
    };
    if (fields.model !== undefined) set("model", fields.model);
    if (fields.results) set("results", JSON.stringify(fields.results));
    if (fields.end) {
      set("status", fields.end.status);
      set("completed_at", fields.end.at);
      set("error", fields.end.error);
    }
    if (sets.length === 0) return;
    await this.db.query(`UPDATE eval_runs SET ${sets.join(", ")} WHERE org = $1 AND id = $2`, values);
  }

  /** The run, unless it is past the retention or beyond its schedule's cap. */
  async getRun(org: string, runId: string): Promise<EvalRun | undefined> {
    const { rows } = await this.db.query<RunRow>(
      `SELECT ${RUN_COLUMNS} FROM eval_runs r
       WHERE org = $1 AND id = $2 AND created_at > $3 AND ${withinCap("r.schedule_id", "$4")}`,
      [org, runId, this.cutoff(), this.options.runsPerSchedule],
    );
    return rows[0] && toRun(rows[0]);
  }

  /** A schedule's runs, newest first (they outlive its deletion); null if `after` names none of them. */
  async runs(org: string, scheduleId: string, limit: number, after?: string): Promise<Page<EvalRun> | null> {
    const values: unknown[] = [org, scheduleId, limit + 1, this.cutoff(), this.options.runsPerSchedule];
    let where = `org = $1 AND schedule_id = $2 AND created_at > $4 AND ${withinCap("$2", "$5")}`;
    if (after !== undefined) {
      if (!postgresCanHold(after)) return null;
      const { rows } = await this.db.query<{ seq: string }>(
        "SELECT seq FROM eval_runs WHERE org = $1 AND id = $2 AND schedule_id = $3",
        [org, after, scheduleId],
      );
      if (!rows[0]) return null;
      values.push(rows[0].seq);
      where += ` AND seq < $${values.length}`;
    }
    const { rows } = await this.db.query<RunRow>(
      `SELECT ${RUN_COLUMNS} FROM eval_runs WHERE ${where} ORDER BY seq DESC LIMIT $3`,
      values,
    );
    return { data: rows.slice(0, limit).map(toRun), has_more: rows.length > limit };
  }

  /**
   * Deletes finished runs past the retention, then deleted schedules that
   * have no run left, `SWEEP_BATCH` rows per statement (rows another sweeper
   * holds are skipped), until none is left; returns how many of each.
   */
  async sweep(batch = SWEEP_BATCH): Promise<{ runs: number; schedules: number }> {
    const cutoff = this.cutoff();
    const runs = await repeat(
      `WITH doomed AS (
         SELECT org, id FROM eval_runs
         WHERE created_at <= $1 AND status NOT IN ('queued', 'running')
         LIMIT $2 FOR UPDATE SKIP LOCKED
       )
       DELETE FROM eval_runs r USING doomed WHERE r.org = doomed.org AND r.id = doomed.id`,
      [cutoff, batch],
      batch,
      this.db,
    );
    const schedules = await repeat(
      `WITH doomed AS (
         SELECT org, id FROM eval_schedules s
         WHERE deleted_at <= $1
           AND NOT EXISTS (SELECT 1 FROM eval_runs r WHERE r.org = s.org AND r.schedule_id = s.id)
         LIMIT $2 FOR UPDATE SKIP LOCKED
       )
       DELETE FROM eval_schedules s USING doomed WHERE s.org = doomed.org AND s.id = doomed.id`,
      [cutoff, batch],
      batch,
      this.db,
    );
    return { runs, schedules };
  }

  /** Runs created at or before this (unix seconds) are past the retention. */
  private cutoff(): number {
    return Math.floor(retentionCutoff(this.clock, this.options.runRetentionMs).getTime() / 1000);
  }
}

/** The organization's advisory lock, for the rest of the transaction. */
async function lockOrganization(tx: Queryable, org: string): Promise<void> {
  await tx.query("SELECT pg_advisory_xact_lock(hashtextextended($1, 0))", [`gw:evals:${org}`]);
}

/** SQL: the run is among the newest `max` of its schedule (`schedule` names the schedule's column or parameter). */
function withinCap(schedule: string, max: string): string {
  return `seq >= coalesce((SELECT seq FROM eval_runs c WHERE c.org = $1 AND c.schedule_id = ${schedule}
                             ORDER BY seq DESC OFFSET ${max} - 1 LIMIT 1), 0)`;
}

/** Runs `sql` (a batched delete) until it deletes fewer than `batch` rows; returns the total. */
async function repeat(sql: string, values: unknown[], batch: number, db: Queryable): Promise<number> {
  let total = 0;
  for (;;) {
    const { rowCount } = await db.query(sql, values);
    total += rowCount ?? 0;
    if ((rowCount ?? 0) < batch) return total;
  }
}

function toSchedule(row: ScheduleRow): EvalSchedule {
  return { ...row.record, deleted_at: row.deleted_at === null ? null : Number(row.deleted_at) };
}

function toRun(row: RunRow): EvalRun {
  const num = (v: string | null) => (v === null ? null : Number(v));
  return {
    id: row.id,
    schedule_id: row.schedule_id,
    status: row.status,
    model: row.model,
    created_at: Number(row.created_at),
    started_at: num(row.started_at),
    completed_at: num(row.completed_at),
    error: row.error,
    results: row.results,
  };
}
