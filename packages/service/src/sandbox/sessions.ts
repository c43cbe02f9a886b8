import { randomBytes } from "node:crypto";
import { AppError, type Principal, type RedisClient } from "@gw/core";

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
    super("not_found", `No sandbox session ${id}`);
    this.name = "SessionNotFound";
  }
}

const SESSION_ID = /^sess_[0-9a-f]{32}$/;

export const newSessionId = () => `sess_${randomBytes(16).toString("hex")}`;

/** Only ids this service issues name a session (and a workspace directory). */
export const isSessionId = (id: string) => SESSION_ID.test(id);

const recordKey = (org: string, id: string) => `gw:sandbox:session:{${org}}:${id}`;

/** Increments the generation only if the session exists and belongs to the user, in one step. */
const NEXT_ASSIGNMENT = `
if redis.call('HGET', KEYS[1], 'user') ~= ARGV[1] then return false end
redis.call('HINCRBY', KEYS[1], 'assignment_generation', 1)
return redis.call('HGETALL', KEYS[1])`;

const DELETE_OWN = `
if redis.call('HGET', KEYS[1], 'user') ~= ARGV[1] then return 0 end
return redis.call('DEL', KEYS[1])`;

/**
 * Session records in Redis, per organization, each naming the user who
 * created it: to anyone else (another user of the organization, or another
 * organization) a session does not exist.
 */
export class SessionStore {
  private readonly redis: RedisClient;

  constructor(redis: RedisClient) {
    this.redis = redis;
  }

  async create(principal: Principal, session: Session): Promise<void> {
    await this.redis.hset(recordKey(principal.org, session.id), {
      user: principal.user,
      owner: session.owner,
      repository: session.repository,
      repository_id: session.repository_id,
      assignment_generation: session.assignment_generation,
      created_at: session.created_at,
    });
  }

  /** The principal's session `id`, if there is one. */
  async find(principal: Principal, id: string): Promise<Session | undefined> {
    if (!isSessionId(id)) return undefined;
    const fields = await this.redis.hgetall(recordKey(principal.org, id));
    return fields.user === principal.user ? toSession(id, fields) : undefined;
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
    const flat = (await this.redis.eval(NEXT_ASSIGNMENT, 1, recordKey(principal.org, id), principal.user)) as
      | string[]
      | null;
    if (!flat) throw new SessionNotFound(id);
    const fields: Record<string, string> = {};
    for (let i = 0; i < flat.length; i += 2) fields[flat[i]!] = flat[i + 1]!;
    return toSession(id, fields);
  }

  async delete(principal: Principal, id: string): Promise<void> {
    if (!isSessionId(id)) throw new SessionNotFound(id);
    const deleted = await this.redis.eval(DELETE_OWN, 1, recordKey(principal.org, id), principal.user);
    if (deleted !== 1) throw new SessionNotFound(id);
  }
}

function toSession(id: string, fields: Record<string, string>): Session {
  return {
    id,
    object: "sandbox.session",
    owner: fields.owner!,
    repository: fields.repository!,
    repository_id: Number(fields.repository_id),
    assignment_generation: Number(fields.assignment_generation),
    created_at: Number(fields.created_at),
  };
}
