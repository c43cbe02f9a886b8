import type { Clock } from "@gw/core/clock";
import { type Postgres, postgresCanHold, type Queryable } from "@gw/core/postgres";

/** What an `mcp_approval_request` item asks, as the response that made it stores it. */
export interface NewApproval {
  /** The item's id (`mcpr_…`). */
  id: string;
  /** The registered server (`mcp_…`) the call goes to: its id, never the label the request gave it. */
  serverId: string;
  tool: string;
  /** The model's arguments, as it sent them. */
  arguments: string;
}

/** A stored approval request: what it asks, of whom, and whether it was answered. */
export interface ApprovalRequest extends NewApproval {
  responseId: string;
  /** The user of the principal who made it (the organization is the store's key). */
  user: string;
  answered: boolean;
}

/**
 * The approval requests of hosted MCP tools (`mcp_approval_requests`), kept
 * with the response that made them and gone with it (a foreign key). An
 * answer claims its requests once: `claim` is the check and the write in one
 * conditional UPDATE per request, so of two answers only one runs anything.
 */
export class ApprovalStore {
  private readonly db: Postgres;
  private readonly clock: Clock;

  constructor(db: Postgres, clock: Clock) {
    this.db = db;
    this.clock = clock;
  }

  /** Stores a response's approval requests, made by `user` (in the transaction that stores the response). */
  async recordIn(
    tx: Queryable,
    org: string,
    responseId: string,
    user: string,
    approvals: NewApproval[],
  ): Promise<void> {
    if (approvals.length === 0) return;
    await tx.query(
      `INSERT INTO mcp_approval_requests (org, id, response_id, user_id, server_id, tool, arguments)
       SELECT $1, a.id, $2, $3, a.server_id, a.tool, a.arguments
         FROM unnest($4::text[], $5::text[], $6::json[], $7::json[]) AS a(id, server_id, tool, arguments)`,
      [
        org,
        responseId,
        user,
        approvals.map((a) => a.id),
        approvals.map((a) => a.serverId),
        approvals.map((a) => JSON.stringify(a.tool)),
        approvals.map((a) => JSON.stringify(a.arguments)),
      ],
    );
  }

  async get(org: string, id: string): Promise<ApprovalRequest | undefined> {
    if (!postgresCanHold(id)) return undefined;
    const { rows } = await this.db.query<{
      response_id: string;
      user_id: string;
      server_id: string;
      tool: string;
      arguments: string;
      answered: boolean;
    }>(
      `SELECT response_id, user_id, server_id, tool, arguments, answered_at IS NOT NULL AS answered
         FROM mcp_approval_requests WHERE org = $1 AND id = $2`,
      [org, id],
    );
    const row = rows[0];
    return (
      row && {
        id,
        responseId: row.response_id,
        user: row.user_id,
        serverId: row.server_id,
        tool: row.tool,
        arguments: row.arguments,
        answered: row.answered,
      }
    );
  }

  /**
   * Marks the approval requests answered by `user`, all of them or none:
   * each row only while it is unanswered and `user`'s, in one conditional
   * UPDATE (in id order, so two claims never wait on each other). Returns
   * the id of a request that could not be claimed (answered meanwhile),
   * having claimed nothing; undefined once all are claimed.
   */
  async claim(
    org: string,
    user: string,
    answers: { id: string; approve: boolean }[],
  ): Promise<string | undefined> {
    const ordered = [...answers].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
    const now = new Date(this.clock.wall());
    try {
      await this.db.transaction(async (tx) => {
        for (const answer of ordered) {
          const { rowCount } = await tx.query(
            `UPDATE mcp_approval_requests SET answered_at = $4, approved = $5
              WHERE org = $1 AND id = $2 AND user_id = $3 AND answered_at IS NULL`,
            [org, answer.id, user, now, answer.approve],
          );
          // Thrown to roll back the claims made so far.
          if (rowCount !== 1) throw new Unclaimed(answer.id);
        }
      });
    } catch (err) {
      if (err instanceof Unclaimed) return err.id;
      throw err;
    }
    return undefined;
  }
}

class Unclaimed extends Error {
  readonly id: string;
  constructor(id: string) {
    super(`The approval request ${id} was answered already`);
    this.id = id;
  }
}
