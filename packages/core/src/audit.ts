import { RESOURCE_TYPES, type ResourceRef, type Role } from "./authz/index.ts";
import { type Clock, retentionCutoff, systemClock } from "./clock.ts";
import type { Logger } from "./logger.ts";
import type { Queryable } from "./postgres.ts";
import type { Principal } from "./principal.ts";

/**
 * `inspect`: an administrator read who holds which role (the admin console), which changes nothing but is
 * recorded; `call`: a tool called through the MCP proxy; `act_as_key_owner`: a request made by one key as
 * a user who owns another key of the organization, which only the key's `onBehalfOf.users` allows;
 * `store` and `delete` of a `provider_key`: an organization's own key for a provider written or removed;
 * `first_use`: the first model call made with a provider key after it was stored; `guardrail.create`,
 * `guardrail.update`, `guardrail.delete` and `guardrail.attach`: a guardrail created, changed, deleted, or
 * its attachments replaced (the record's `attachments` says where it is attached after the change);
 * `guardrail.decision`: a guardrail's check found something in a model call's input or output (the record
 * names the check, what the guardrail did and which way the text went; never the text).
 */
export const AUDIT_ACTIONS = [
  "register",
  "delete",
  "grant",
  "revoke",
  "inspect",
  "call",
  "act_as_key_owner",
  "store",
  "first_use",
  "guardrail.create",
  "guardrail.update",
  "guardrail.delete",
  "guardrail.attach",
  "guardrail.decision",
] as const;
export type AuditAction = (typeof AUDIT_ACTIONS)[number];

/**
 * What a record is about: a resource, the user acted as (`act_as_key_owner`), an organization's own
 * provider key (`provider_key`, its id the provider: `openai`, `azure`, `anthropic`), or the organization's
 * OpenID Connect provider for MCP clients' sign-in (`identity_provider`, its id the issuer; `store`, `delete`).
 */
export const AUDIT_RESOURCE_TYPES = [...RESOURCE_TYPES, "user", "provider_key", "identity_provider"] as const;
export type AuditResourceType = (typeof AUDIT_RESOURCE_TYPES)[number];

/**
 * `allowed`: the write landed; `denied`: not an owner (403); `conflict`: 409;
 * `error`: it failed otherwise; `unknown`: the outcome was never recorded (the
 * process stopped, or PostgreSQL was lost, between the change and its
 * outcome): the change may or may not have landed.
 */
export type AuditOutcome = "allowed" | "denied" | "conflict" | "error" | "unknown";

/** What happened, as a request describes it before it runs. */
export interface AuditEvent {
  action: Exclude<AuditAction, "call" | "act_as_key_owner" | "store" | "first_use" | `guardrail.${string}`>;
  resource: ResourceRef;
  /** The user whose role changes (grant, revoke). */
  subject?: string;
  role?: Role;
  expiresAt?: Date;
}

/** One audit record, as stored and as listed. Nothing in it is a secret. */
export interface AuditRecord {
  /** `<time in ms>-<sequence>`: the cursor of listings. */
  id: string;
  time: string;
  organization: string;
  actor: { userId: string; keyId: string; credential: Principal["credential"] };
  action: AuditAction;
  resourceType: AuditResourceType;
  resourceId: string;
  subject?: string;
  role?: Role;
  expiresAt?: string;
  /** An MCP tools/call (`call`): the tool, the decision, how long it took and a SHA-256 of its arguments (never the arguments). */
  tool?: string;
  decision?: "allowed" | "denied";
  durationMs?: number;
  argumentsSha256?: string;
  /** `act_as_key_owner`: the request's method and path (without its query). */
  request?: string;
  /** `guardrail.attach`: where the guardrail is attached after the change (`organization`, `key:<id>`, `model:<name>`). */
  attachments?: string[];
  /** `guardrail.decision`: the check that found something, what the guardrail did, and on which side of the call. */
  check?: string;
  guardrailAction?: "block" | "redact" | "flag";
  direction?: "input" | "output";
  outcome: AuditOutcome;
  requestId: string;
  /** The ZedToken of the write, when one landed. */
  zedToken?: string;
}

/** What a request records before its change runs: everything but the id, the time and how it ended. */
export type AuditIntent = Omit<AuditRecord, "id" | "time" | "outcome" | "zedToken">;

/** What of a principal a record names. */
type AuditedPrincipal = Pick<Principal, "user" | "keyId" | "credential">;

/** Who acted, as a record names them: the principal's user, key and kind of credential. */
export function auditActor(principal: AuditedPrincipal): AuditRecord["actor"] {
  return { userId: principal.user, keyId: principal.keyId, credential: principal.credential };
}

/** A principal's `action` on one resource in one request, as its record begins. */
export function auditIntent(
  actor: { principal: AuditedPrincipal & Pick<Principal, "org">; requestId: string },
  action: AuditAction,
  resourceType: AuditResourceType,
  resourceId: string,
): AuditIntent {
  return {
    organization: actor.principal.org,
    actor: auditActor(actor.principal),
    action,
    resourceType,
    resourceId,
    requestId: actor.requestId,
  };
}

export interface AuditPage {
  data: AuditRecord[];
  next_cursor: string | null;
}

/** Narrows an organization's listing; every filter given must hold. */
export interface AuditFilters {
  /** The acting user. */
  actor?: string | undefined;
  resourceType?: AuditResourceType | undefined;
  /** Only with `resourceType`. */
  resourceId?: string | undefined;
  action?: AuditAction | undefined;
  /** Records at or after / before these instants. */
  since?: Date | undefined;
  until?: Date | undefined;
}

export interface AuditLogOptions {
  /**
   * How long records are kept, in milliseconds (`AUDIT_RETENTION`): older ones vanish from reads at once.
   * None for a process that only writes records (the service): the gateway reads and sweeps them.
   */
  retentionMs: number | undefined;
  logger?: Logger;
  /** Its wall time stamps records and bounds the retention (tests move it). */
  clock?: Clock;
  /**
   * Told when records given to `recordSoon` could not be kept (PostgreSQL
   * refused the batch, or too many were waiting): how many, and why.
   */
  onLost?: (count: number, err: Error) => void;
}

/** Records `recordSoon` holds at most while PostgreSQL is slow or away; more are counted lost. */
const MAX_WAITING_RECORDS = 10_000;
/** How long `recordSoon` gathers records before writing them, in milliseconds. */
const BATCH_WINDOW_MS = 10;
/** Records written by one statement at most. */
const RECORDS_PER_BATCH = 500;

interface WaitingRecord {
  intent: AuditIntent;
  at: Date;
  outcome: AuditOutcome;
}

/** What a listing narrows to: anything a record can be about. */
type AuditedThing = { type: AuditResourceType; id: string };

/** A record's id and the cursor of listings: `<time in ms>-<sequence>`. */
export const AUDIT_CURSOR = /^\d{1,15}-\d{1,15}$/;

/** Longer than any id or user id a route takes (256): an index entry stays within PostgreSQL's limit. */
const MAX_KEY_CHARS = 512;

/**
 * A value as the columns that filters compare hold it (`resource_id`,
 * `actor`, `action`): PostgreSQL's text cannot hold U+0000 or a lone
 * surrogate, so each becomes U+FFFD, and it is cut at `MAX_KEY_CHARS`. The
 * record beside them keeps every value exactly (JSON escapes both), and is
 * what a read answers; a filter compares this same form of what it asks.
 */
export function auditKeyText(value: string): string {
  return value.slice(0, MAX_KEY_CHARS).toWellFormed().replaceAll("\u0000", "\ufffd");
}

interface Row {
  seq: string;
  at: Date;
  record: Omit<AuditRecord, "id" | "time" | "outcome" | "zedToken">;
  outcome: AuditOutcome;
  zed_token: string | null;
}

/**
 * The audit trail of role changes, in PostgreSQL (`audit_records`). A change
 * is recorded before it runs (`begin`, outcome `unknown`) and its outcome
 * after (`settle`), so no change lands without its record. Reads page newest
 * first and leave out records past the retention; `sweep` deletes those in
 * batches. Every settled record is also logged as one structured line.
 */
export class AuditLog {
  private readonly db: Queryable;
  private readonly retentionMs: number | undefined;
  private readonly logger: Logger | undefined;
  private readonly clock: Clock;
  private readonly onLost: ((count: number, err: Error) => void) | undefined;
  private waiting: WaitingRecord[] = [];
  /** The batches being written, one after the other, until none waits. */
  private writing: Promise<void> | undefined;

  constructor(db: Queryable, options: AuditLogOptions) {
    this.db = db;
    this.retentionMs = options.retentionMs;
    this.logger = options.logger;
    this.clock = options.clock ?? systemClock;
    this.onLost = options.onLost;
  }

  /** Records a change about to run, its outcome `unknown`; throws (a 503 on an outage) if PostgreSQL cannot keep it. */
  async begin(intent: AuditIntent): Promise<AuditRecord> {
    // Milliseconds only, so the time in the cursor matches the stored one exactly.
    const at = new Date(this.clock.wall());
    const seq = await this.insert(intent, at, "unknown");
    return toRecord({ seq, at, record: intent, outcome: "unknown", zed_token: null });
  }

  /**
   * Records something already decided and done (an MCP tool call), in one
   * statement; with `tx`, in that transaction, so the record and the change
   * it describes are kept together or not at all.
   */
  async record(intent: AuditIntent, outcome: AuditOutcome, tx?: Queryable): Promise<AuditRecord> {
    const at = new Date(this.clock.wall());
    const seq = await this.insert(intent, at, outcome, tx);
    const recorded = toRecord({ seq, at, record: intent, outcome, zed_token: null });
    this.logger?.info({ audit: recorded }, "audit");
    return recorded;
  }

  /**
   * Records something already decided and done whose answer need not wait
   * for its record (an MCP tool call): stamped now, written within about
   * 10 ms in batches, in order, by one statement per batch. Reads of this log, and
   * `flush`, wait for what is waiting. What PostgreSQL refuses is told to
   * `onLost`, as an awaited `record`'s failure would be told by its caller.
   */
  recordSoon(intent: AuditIntent, outcome: AuditOutcome): void {
    if (this.waiting.length >= MAX_WAITING_RECORDS) {
      this.onLost?.(1, new Error(`${MAX_WAITING_RECORDS} audit records are already waiting to be written`));
      return;
    }
    this.waiting.push({ intent, at: new Date(this.clock.wall()), outcome });
    // A moment later: the answer is written first, and the records of the calls answered meanwhile
    // share a statement (each statement costs the process a write and a read of PostgreSQL's socket).
    this.writing ??= new Promise<void>((resolve) => setTimeout(resolve, BATCH_WINDOW_MS)).then(() =>
      this.writeWaiting(),
    );
  }

  /** Resolves once every record given to `recordSoon` so far is written (or told lost). */
  async flush(): Promise<void> {
    while (this.writing) await this.writing;
  }

  private async writeWaiting(): Promise<void> {
    while (this.waiting.length > 0) {
      const batch = this.waiting.splice(0, RECORDS_PER_BATCH);
      try {
        const { rows } = await this.db.query<Row>(
          `INSERT INTO audit_records (org, at, resource_type, resource_id, actor, action, record, outcome)
           SELECT * FROM unnest($1::text[], $2::timestamptz[], $3::text[], $4::text[], $5::text[],
                                $6::text[], $7::json[], $8::text[])
           RETURNING seq, at, record, outcome, zed_token`,
          [
            batch.map((r) => auditKeyText(r.intent.organization)),
            batch.map((r) => r.at),
            batch.map((r) => auditKeyText(r.intent.resourceType)),
            batch.map((r) => auditKeyText(r.intent.resourceId)),
            batch.map((r) => auditKeyText(r.intent.actor.userId)),
            batch.map((r) => auditKeyText(r.intent.action)),
            batch.map((r) => JSON.stringify(r.intent)),
            batch.map((r) => r.outcome),
          ],
        );
        for (const row of rows) this.logger?.info({ audit: toRecord(row) }, "audit");
      } catch (err) {
        this.onLost?.(batch.length, err as Error);
      }
    }
    this.writing = undefined;
  }

  /**
   * One row: the record as JSON (the `json` type keeps the escapes of U+0000
   * and lone surrogates as sent), and the columns filters compare in the form
   * PostgreSQL's text can hold (`auditKeyText`), so no value can fail the write.
   */
  private async insert(
    intent: AuditIntent,
    at: Date,
    outcome: AuditOutcome,
    db: Queryable = this.db,
  ): Promise<string> {
    const { rows } = await db.query<{ seq: string }>(
      `INSERT INTO audit_records (org, at, resource_type, resource_id, actor, action, record, outcome)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING seq`,
      [
        auditKeyText(intent.organization),
        at,
        auditKeyText(intent.resourceType),
        auditKeyText(intent.resourceId),
        auditKeyText(intent.actor.userId),
        auditKeyText(intent.action),
        JSON.stringify(intent),
        outcome,
      ],
    );
    return rows[0]!.seq;
  }

  /** Records how a change begun with `begin` ended. */
  async settle(begun: AuditRecord, outcome: AuditOutcome, zedToken?: string): Promise<AuditRecord> {
    const seq = begun.id.slice(begun.id.indexOf("-") + 1);
    await this.db.query("UPDATE audit_records SET outcome = $2, zed_token = $3 WHERE seq = $1", [
      seq,
      outcome,
      zedToken ?? null,
    ]);
    const settled: AuditRecord = { ...begun, outcome, ...(zedToken ? { zedToken } : {}) };
    this.logger?.info({ audit: settled }, "audit");
    return settled;
  }

  /** An organization's records, newest first, narrowed by `filters`. */
  async forOrganization(
    org: string,
    page: { limit: number; cursor?: string | undefined },
    filters: AuditFilters = {},
  ): Promise<AuditPage> {
    // An id names a resource only with its type (the route refuses one without, 422).
    if (filters.resourceId !== undefined && !filters.resourceType)
      throw new Error("An audit filter by resource id needs the resource's type");
    const resource: AuditedThing | undefined =
      filters.resourceType && filters.resourceId !== undefined
        ? { type: filters.resourceType, id: filters.resourceId }
        : undefined;
    return this.read(org, resource, page, filters);
  }

  /**
   * Guardrail decisions of the organization's model calls (`guardrail.decision`
   * records) counted per guardrail and action, over the kept trail or
   * `[since, until)`; by guardrail id, then action.
   */
  async guardrailDecisions(
    org: string,
    range: { since?: Date | undefined; until?: Date | undefined } = {},
  ): Promise<{ guardrail: string; action: string; count: number }[]> {
    await this.flush();
    const values: unknown[] = [auditKeyText(org), this.cutoff()];
    let where = "org = $1 AND at > $2 AND resource_type = 'guardrail' AND action = 'guardrail.decision'";
    if (range.since) {
      values.push(range.since);
      where += ` AND at >= $${values.length}`;
    }
    if (range.until) {
      values.push(range.until);
      where += ` AND at < $${values.length}`;
    }
    // Only the action's own field leaves the record as text: the pipeline writes it, one of three words.
    const { rows } = await this.db.query<{ guardrail: string; action: string; count: string }>(
      `SELECT resource_id AS guardrail, record->>'guardrailAction' AS action, count(*) AS count
       FROM audit_records WHERE ${where}
       GROUP BY 1, 2 ORDER BY 1, 2`,
      values,
    );
    return rows.map((r) => ({ guardrail: r.guardrail, action: r.action, count: Number(r.count) }));
  }

  /** One resource's records, newest first. */
  forResource(
    org: string,
    resource: ResourceRef,
    page: { limit: number; cursor?: string | undefined },
  ): Promise<AuditPage> {
    return this.read(org, resource, page);
  }

  /**
   * Deletes records past the retention, `batch` rows per statement (rows
   * another sweeper holds are skipped), until none is left; returns how many.
   */
  async sweep(batch = 1_000): Promise<number> {
    const cutoff = this.cutoff();
    let total = 0;
    for (;;) {
      const { rowCount } = await this.db.query(
        `WITH doomed AS (
           SELECT seq FROM audit_records WHERE at <= $1 LIMIT $2 FOR UPDATE SKIP LOCKED
         )
         DELETE FROM audit_records a USING doomed WHERE a.seq = doomed.seq`,
        [cutoff, batch],
      );
      total += rowCount ?? 0;
      if ((rowCount ?? 0) < batch) return total;
    }
  }

  /** Records at or before this instant are past the retention. */
  private cutoff(): Date {
    if (this.retentionMs === undefined) throw new Error("This audit log only writes: it has no retention");
    return retentionCutoff(this.clock, this.retentionMs);
  }

  private async read(
    org: string,
    resource: AuditedThing | undefined,
    page: { limit: number; cursor?: string | undefined },
    filters: AuditFilters = {},
  ): Promise<AuditPage> {
    // A listing shows every record given before it was asked for.
    await this.flush();
    // Filters compare columns, never the record: PostgreSQL's JSON operators would turn every string of
    // every record they pass into text, and fail on one holding U+0000 or a lone surrogate.
    const values: unknown[] = [auditKeyText(org), this.cutoff(), page.limit + 1];
    let where = "org = $1 AND at > $2";
    if (resource) {
      values.push(auditKeyText(resource.type), auditKeyText(resource.id));
      where += ` AND resource_type = $${values.length - 1} AND resource_id = $${values.length}`;
    } else if (filters.resourceType) {
      values.push(auditKeyText(filters.resourceType));
      where += ` AND resource_type = $${values.length}`;
    }
    if (filters.actor !== undefined) {
      values.push(auditKeyText(filters.actor));
      where += ` AND actor = $${values.length}`;
    }
    if (filters.action) {
      values.push(auditKeyText(filters.action));
      where += ` AND action = $${values.length}`;
    }
    if (filters.since) {
      values.push(filters.since);
      where += ` AND at >= $${values.length}`;
    }
    if (filters.until) {
      values.push(filters.until);
      where += ` AND at < $${values.length}`;
    }
    if (page.cursor) {
      const [ms, seq] = page.cursor.split("-");
      values.push(new Date(Number(ms)), seq);
      where += ` AND (at, seq) < ($${values.length - 1}, $${values.length})`;
    }
    const { rows } = await this.db.query<Row>(
      `SELECT seq, at, record, outcome, zed_token FROM audit_records
       WHERE ${where} ORDER BY at DESC, seq DESC LIMIT $3`,
      values,
    );
    const data = rows.slice(0, page.limit).map(toRecord);
    return { data, next_cursor: rows.length > page.limit ? (data.at(-1)?.id ?? null) : null };
  }
}

function toRecord(row: Row): AuditRecord {
  const { organization, actor, action, resourceType, resourceId, subject, role, expiresAt, requestId } =
    row.record;
  const { tool, decision, durationMs, argumentsSha256, request, attachments } = row.record;
  const { check, guardrailAction, direction } = row.record;
  return {
    id: `${row.at.getTime()}-${row.seq}`,
    time: row.at.toISOString(),
    organization,
    actor,
    action,
    resourceType,
    resourceId,
    ...(subject !== undefined ? { subject } : {}),
    ...(role ? { role } : {}),
    ...(expiresAt ? { expiresAt } : {}),
    ...(tool !== undefined ? { tool, decision, durationMs, argumentsSha256 } : {}),
    ...(request !== undefined ? { request } : {}),
    ...(attachments !== undefined ? { attachments } : {}),
    ...(check !== undefined ? { check, guardrailAction, direction } : {}),
    outcome: row.outcome,
    requestId,
    ...(row.zed_token ? { zedToken: row.zed_token } : {}),
  };
}
