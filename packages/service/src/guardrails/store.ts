import { type AuditLog, auditIntent } from "@gw/core/audit";
import type { Clock } from "@gw/core/clock";
import type { Action, AppliesTo, Check, Policy } from "@gw/core/guardrails";
import type { Postgres, Queryable } from "@gw/core/postgres";
import type { Principal } from "@gw/core/principal";

export type { AppliesTo };
export type GuardrailAction = Action;
type GuardrailCheck = Check;

/** A guardrail as the API shows it. */
export interface GuardrailObject {
  id: string;
  object: "guardrail";
  name: string;
  checks: GuardrailCheck[];
  applies_to: AppliesTo;
  action: GuardrailAction;
  /** Unix seconds. */
  created_at: number;
}

/** Where a guardrail applies: every call of its organization, the calls of one key, or of one model name. */
export type Attachment =
  | { scope: "organization" }
  | { scope: "key"; key_id: string }
  | { scope: "model"; model: string };

/** A guardrail as resolution hands it to the model-call pipeline (what `evaluate` of `@gw/core/guardrails` takes). */
export interface GuardrailPolicy extends Policy {
  id: string;
  name: string;
  /** One more at each change of the guardrail or of its attachments. */
  version: number;
  checks: GuardrailCheck[];
  applies_to: AppliesTo;
  action: GuardrailAction;
}

/** Who changes a guardrail, for its audit record. */
export interface GuardrailActor {
  principal: Principal;
  requestId: string;
}

interface Row {
  id: string;
  name: string;
  checks: GuardrailCheck[];
  applies_to: AppliesTo;
  action: GuardrailAction;
  version: string;
  created_at: string;
}

const COLUMNS = "id, name, checks, applies_to, action, version, created_at";

/** One attachment as a row keeps it: its scope and its target (`""` for the organization). */
export const targetOf = (a: Attachment): string =>
  a.scope === "key" ? a.key_id : a.scope === "model" ? a.model : "";

export function attachmentOf(scope: string, target: string): Attachment {
  if (scope === "key") return { scope, key_id: target };
  if (scope === "model") return { scope, model: target };
  return { scope: "organization" };
}

/** How an audit record names an attachment: `organization`, `key:<id>`, `model:<name>`. */
export const attachmentLabel = (a: Attachment): string =>
  a.scope === "organization" ? "organization" : `${a.scope}:${targetOf(a)}`;

/**
 * Guardrails and their attachments in PostgreSQL (`guardrails`,
 * `guardrail_attachments`). Every change is written with its audit record in
 * one transaction, so none lands without it; a change that moves what
 * resolution answers then tells `changed`, which every replica's cache
 * watches (`GuardrailResolver`).
 */
export class GuardrailStore {
  private readonly db: Postgres;
  private readonly audit: AuditLog;
  private readonly clock: Clock;
  private readonly changed: (org: string) => Promise<void>;

  constructor(
    db: Postgres,
    audit: AuditLog,
    options: { clock: Clock; changed: (org: string) => Promise<void> },
  ) {
    this.db = db;
    this.audit = audit;
    this.clock = options.clock;
    this.changed = options.changed;
  }

  get database(): Postgres {
    return this.db;
  }

  async create(
    actor: GuardrailActor,
    input: {
      id: string;
      name: string;
      checks: GuardrailCheck[];
      applies_to: AppliesTo;
      action: GuardrailAction;
    },
  ): Promise<GuardrailObject> {
    const now = Math.floor(this.clock.wall() / 1000);
    return this.db.transaction(async (tx) => {
      const { rows } = await tx.query<Row>(
        `INSERT INTO guardrails (org, id, name, checks, applies_to, action, version, created_at, updated_at)
         VALUES ($1, $2, $3, $4, $5, $6, 1, $7, $7) RETURNING ${COLUMNS}`,
        [
          actor.principal.org,
          input.id,
          input.name,
          JSON.stringify(input.checks),
          input.applies_to,
          input.action,
          now,
        ],
      );
      await this.audit.record(auditIntent(actor, "guardrail.create", "guardrail", input.id), "allowed", tx);
      return view(rows[0]!);
    });
  }

  async get(org: string, id: string): Promise<GuardrailObject | undefined> {
    const { rows } = await this.db.query<Row>(
      `SELECT ${COLUMNS} FROM guardrails WHERE org = $1 AND id = $2`,
      [org, id],
    );
    return rows[0] ? view(rows[0]) : undefined;
  }

  /** The organization's guardrails among `ids`, oldest first (ties by id). */
  async getMany(org: string, ids: readonly string[]): Promise<GuardrailObject[]> {
    if (ids.length === 0) return [];
    const { rows } = await this.db.query<Row>(
      `SELECT ${COLUMNS} FROM guardrails WHERE org = $1 AND id = ANY($2::text[]) ORDER BY created_at, id`,
      [org, ids],
    );
    return rows.map(view);
  }

  /** Changes the fields given; `undefined` when there is no such guardrail. */
  async update(
    actor: GuardrailActor,
    id: string,
    patch: Partial<Pick<GuardrailObject, "name" | "checks" | "applies_to" | "action">>,
    /** Whether the change may be made where the guardrail is attached (read under its row lock). */
    mayChange: (attached: Attachment[]) => Promise<void> = async () => undefined,
  ): Promise<GuardrailObject | undefined> {
    const { org } = actor.principal;
    const updated = await this.db.transaction(async (tx) => {
      const attached = await this.lockedAttachments(tx, org, id);
      if (!attached) return undefined;
      await mayChange(attached);
      const { rows } = await tx.query<Row>(
        `UPDATE guardrails SET name = COALESCE($3, name), checks = COALESCE($4::json, checks),
           applies_to = COALESCE($5, applies_to), action = COALESCE($6, action),
           version = version + 1, updated_at = $7
         WHERE org = $1 AND id = $2 RETURNING ${COLUMNS}`,
        [
          org,
          id,
          patch.name ?? null,
          patch.checks ? JSON.stringify(patch.checks) : null,
          patch.applies_to ?? null,
          patch.action ?? null,
          Math.floor(this.clock.wall() / 1000),
        ],
      );
      if (!rows[0]) return undefined;
      await this.audit.record(auditIntent(actor, "guardrail.update", "guardrail", id), "allowed", tx);
      return view(rows[0]);
    });
    if (updated) await this.changed(org);
    return updated;
  }

  /**
   * Deletes the guardrail and its attachments, once `mayDetach` (given the
   * attachments it has, read under the guardrail's row lock, so no
   * replacement runs between) allows it; false when there is no such guardrail.
   */
  async delete(
    actor: GuardrailActor,
    id: string,
    mayDetach: (attached: Attachment[]) => Promise<void>,
  ): Promise<boolean> {
    const { org } = actor.principal;
    const deleted = await this.db.transaction(async (tx) => {
      const attached = await this.lockedAttachments(tx, org, id);
      if (!attached) return false;
      await mayDetach(attached);
      await tx.query("DELETE FROM guardrails WHERE org = $1 AND id = $2", [org, id]);
      await this.audit.record(auditIntent(actor, "guardrail.delete", "guardrail", id), "allowed", tx);
      return true;
    });
    if (deleted) await this.changed(org);
    return deleted;
  }

  /** Where the guardrail is attached (organization first, then keys, then models, each by target); `undefined` when there is no such guardrail. */
  async attachments(org: string, id: string): Promise<Attachment[] | undefined> {
    const { rows } = await this.db.query<{ scope: string; target: string; found: boolean }>(
      `SELECT a.scope, a.target, true AS found FROM guardrails g
         LEFT JOIN guardrail_attachments a ON a.org = g.org AND a.guardrail_id = g.id
       WHERE g.org = $1 AND g.id = $2`,
      [org, id],
    );
    if (rows.length === 0) return undefined;
    return sortAttachments(rows.filter((r) => r.scope !== null).map((r) => attachmentOf(r.scope, r.target)));
  }

  /**
   * Replaces where the guardrail is attached with `next`, once `mayChange`
   * (given what it was attached to, read under the guardrail's row lock, so
   * two replacements never judge the same old list) allows it; `undefined`
   * when there is no such guardrail.
   */
  async replaceAttachments(
    actor: GuardrailActor,
    id: string,
    next: Attachment[],
    mayChange: (before: Attachment[]) => Promise<void>,
  ): Promise<Attachment[] | undefined> {
    const { org } = actor.principal;
    const after = sortAttachments(next);
    const replaced = await this.db.transaction(async (tx) => {
      const before = await this.lockedAttachments(tx, org, id);
      if (!before) return undefined;
      await mayChange(before);
      await tx.query("DELETE FROM guardrail_attachments WHERE org = $1 AND guardrail_id = $2", [org, id]);
      if (after.length > 0)
        await tx.query(
          `INSERT INTO guardrail_attachments (org, guardrail_id, scope, target)
           SELECT $1, $2, s, t FROM unnest($3::text[], $4::text[]) AS x(s, t)`,
          [org, id, after.map((a) => a.scope), after.map(targetOf)],
        );
      await tx.query(
        "UPDATE guardrails SET version = version + 1, updated_at = $3 WHERE org = $1 AND id = $2",
        [org, id, Math.floor(this.clock.wall() / 1000)],
      );
      await this.audit.record(
        {
          ...auditIntent(actor, "guardrail.attach", "guardrail", id),
          attachments: after.map(attachmentLabel),
        },
        "allowed",
        tx,
      );
      return after;
    });
    if (replaced) await this.changed(org);
    return replaced;
  }

  /**
   * Every attached guardrail of the organization with where it is attached,
   * oldest guardrail first: what resolution caches.
   */
  async attachedPolicies(org: string): Promise<{ policy: GuardrailPolicy; attachments: Attachment[] }[]> {
    const { rows } = await this.db.query<Row & { scope: string; target: string }>(
      `SELECT g.id, g.name, g.checks, g.applies_to, g.action, g.version, g.created_at, a.scope, a.target
       FROM guardrail_attachments a JOIN guardrails g ON g.org = a.org AND g.id = a.guardrail_id
       WHERE a.org = $1 ORDER BY g.created_at, g.id`,
      [org],
    );
    const byId = new Map<string, { policy: GuardrailPolicy; attachments: Attachment[] }>();
    for (const row of rows) {
      let entry = byId.get(row.id);
      if (!entry) {
        entry = {
          policy: {
            id: row.id,
            name: row.name,
            version: Number(row.version),
            checks: row.checks,
            applies_to: row.applies_to,
            action: row.action,
          },
          attachments: [],
        };
        byId.set(row.id, entry);
      }
      entry.attachments.push(attachmentOf(row.scope, row.target));
    }
    return [...byId.values()];
  }

  /** The guardrail's attachments with its row locked until the transaction ends; `undefined` when there is none. */
  private async lockedAttachments(tx: Queryable, org: string, id: string): Promise<Attachment[] | undefined> {
    const { rowCount } = await tx.query("SELECT 1 FROM guardrails WHERE org = $1 AND id = $2 FOR UPDATE", [
      org,
      id,
    ]);
    if (!rowCount) return undefined;
    const { rows } = await tx.query<{ scope: string; target: string }>(
      "SELECT scope, target FROM guardrail_attachments WHERE org = $1 AND guardrail_id = $2",
      [org, id],
    );
    return sortAttachments(rows.map((r) => attachmentOf(r.scope, r.target)));
  }
}

const SCOPE_ORDER = { organization: 0, key: 1, model: 2 } as const;

/** Organization first, then keys, then models, each by target: the one order every answer uses. */
export function sortAttachments(list: Attachment[]): Attachment[] {
  return [...list].sort(
    (a, b) =>
      SCOPE_ORDER[a.scope] - SCOPE_ORDER[b.scope] ||
      (targetOf(a) < targetOf(b) ? -1 : targetOf(a) > targetOf(b) ? 1 : 0),
  );
}

function view(row: Row): GuardrailObject {
  return {
    id: row.id,
    object: "guardrail",
    name: row.name,
    checks: row.checks,
    applies_to: row.applies_to,
    action: row.action,
    created_at: Number(row.created_at),
  };
}
