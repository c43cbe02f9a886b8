import { randomBytes } from "node:crypto";
import { AppError } from "@gw/core/errors";
import type { Queryable } from "@gw/core/postgres";
import type { Principal } from "@gw/core/principal";

/** The session object of the API. */
export interface Session {
  id: string;
  object: "sandbox.session";
  owner: string;
  repository: string;
  repository_id: number;
  assignment_generation: number;
  created_at: number;
}

export class SessionNotFound extends AppError {
  constructor(id: string) {
    super("not_found", `No sandbox session ${id}`, { reason: "session_not_found" });
    this.name = "SessionNotFound";
  }
}

const SESSION_ID = /^sess_[0-9a-f]{32}$/;

export const newSessionId = () => `sess_${randomBytes(16).toString("hex")}`;

/** Only ids this service issues name a session (and a workspace directory). */
export const isSessionId = (id: string) => SESSION_ID.test(id);

interface Row {
  owner: string;
  repository: string;
  repository_id: string;
  assignment_generation: string;
  created_at: string;
}

const COLUMNS = "owner, repository, repository_id, assignment_generation, created_at";

/**
 * Session records in PostgreSQL (`sandbox_sessions`), per organization, each
 * naming the user who created it: to anyone else (another user of the
 * organization, or another organization) a session does not exist.
 */
export class SessionStore {
  private readonly db: Queryable;

  constructor(db: Queryable) {
    this.db = db;
  }

  async create(principal: Principal, session: Session): Promise<void> {
    await this.db.query(
      `INSERT INTO sandbox_sessions (org, id, user_id, ${COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
      [
        principal.org,
        session.id,
        principal.user,
        session.owner,
        session.repository,
        session.repository_id,
        session.assignment_generation,
        session.created_at,
      ],
    );
  }

  /** The principal's session `id`, if there is one. */
  async find(principal: Principal, id: string): Promise<Session | undefined> {
    if (!isSessionId(id)) return undefined;
    const { rows } = await this.db.query<Row>(
      `SELECT ${COLUMNS} FROM sandbox_sessions WHERE org = $1 AND id = $2 AND user_id = $3`,
      [principal.org, id, principal.user],
    );
    return rows[0] && toSession(id, rows[0]);
  }

  /** The principal's session `id`, else `SessionNotFound`. */
  async get(principal: Principal, id: string): Promise<Session> {
    const session = await this.find(principal, id);
    if (!session) throw new SessionNotFound(id);
    return session;
  }

  /** Starts a new assignment: the generation, incremented atomically, in the session returned. */
  async nextAssignment(principal: Principal, id: string): Promise<Session> {
    if (!isSessionId(id)) throw new SessionNotFound(id);
    const { rows } = await this.db.query<Row>(
      `UPDATE sandbox_sessions SET assignment_generation = assignment_generation + 1
       WHERE org = $1 AND id = $2 AND user_id = $3 RETURNING ${COLUMNS}`,
      [principal.org, id, principal.user],
    );
    if (!rows[0]) throw new SessionNotFound(id);
    return toSession(id, rows[0]);
  }

  async delete(principal: Principal, id: string): Promise<void> {
    if (!isSessionId(id)) throw new SessionNotFound(id);
    const { rowCount } = await this.db.query(
      "DELETE FROM sandbox_sessions WHERE org = $1 AND id = $2 AND user_id = $3",
      [principal.org, id, principal.user],
    );
    if (rowCount !== 1) throw new SessionNotFound(id);
  }
}

function toSession(id: string, row: Row): Session {
  return {
    id,
    object: "sandbox.session",
    owner: row.owner,
    repository: row.repository,
    repository_id: Number(row.repository_id),
    assignment_generation: Number(row.assignment_generation),
    created_at: Number(row.created_at),
  };
}
