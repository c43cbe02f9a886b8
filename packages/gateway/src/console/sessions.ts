import { createHash, randomBytes, timingSafeEqual } from "node:crypto";
import type { Clock } from "@gw/core/clock";
import type { RedisClient } from "@gw/core/redis";

/** What a console session knows: which key signed in (never its secret), and the session's CSRF token. */
export interface ConsoleSession {
  keyId: string;
  org: string;
  user: string;
  /** Sent back on every state-changing request (`X-CSRF-Token`, or the `csrf` form field). */
  csrf: string;
  /** Wall-clock milliseconds. */
  createdAt: number;
  lastSeenAt: number;
}

export interface ConsoleSessionOptions {
  /** A session unused this long ends, in milliseconds. */
  idleMs: number;
  /** A session ends this long after sign-in, however busy, in milliseconds. */
  maxAgeMs: number;
  /** Its wall time (sessions are shared by every replica through Redis). */
  clock: Clock;
}

// The id is a bearer secret: Redis holds only its SHA-256, as for API keys.
const digest = (id: string) => createHash("sha256").update(id).digest("hex");
const sessionKey = (id: string) => `gw:console-session:${digest(id)}`;
const keySessions = (keyId: string) => `gw:console-sessions-of:${keyId}`;

/**
 * Admin console sessions in Redis: `gw:console-session:<sha256(id)>` holds
 * the session (expiring with it), `gw:console-sessions-of:<keyId>` the
 * digests of a key's sessions, so a revoked key's sessions all end at once.
 */
export class ConsoleSessions {
  private readonly redis: RedisClient;
  private readonly idleMs: number;
  private readonly maxAgeMs: number;
  private readonly clock: Clock;

  constructor(redis: RedisClient, options: ConsoleSessionOptions) {
    this.redis = redis;
    this.idleMs = options.idleMs;
    this.maxAgeMs = options.maxAgeMs;
    this.clock = options.clock;
  }

  /** Starts a session for a key; returns the id for the cookie (shown nowhere else) and the session. */
  async create(owner: {
    keyId: string;
    org: string;
    user: string;
  }): Promise<{ id: string; session: ConsoleSession }> {
    const id = randomBytes(32).toString("base64url");
    const at = this.clock.wall();
    const session: ConsoleSession = {
      ...owner,
      csrf: randomBytes(32).toString("base64url"),
      createdAt: at,
      lastSeenAt: at,
    };
    await this.redis.set(sessionKey(id), JSON.stringify(session), "PX", this.ttl(session, at));
    await this.redis.sadd(keySessions(owner.keyId), digest(id));
    await this.redis.pexpire(keySessions(owner.keyId), this.maxAgeMs);
    return { id, session };
  }

  /** The live session of a cookie's id, its idle expiry pushed back; `undefined` when it has ended. */
  async touch(id: string): Promise<ConsoleSession | undefined> {
    const json = await this.redis.get(sessionKey(id));
    if (!json) return undefined;
    const session = JSON.parse(json) as ConsoleSession;
    const at = this.clock.wall();
    if (this.ttl(session, at) <= 0) {
      await this.end(id);
      return undefined;
    }
    session.lastSeenAt = at;
    // XX: a sign-out between the read and this write is not undone.
    const kept = await this.redis.set(
      sessionKey(id),
      JSON.stringify(session),
      "PX",
      this.ttl(session, at),
      "XX",
    );
    return kept === "OK" ? session : undefined;
  }

  async end(id: string): Promise<void> {
    const json = await this.redis.get(sessionKey(id));
    await this.redis.del(sessionKey(id));
    if (json) await this.redis.srem(keySessions((JSON.parse(json) as ConsoleSession).keyId), digest(id));
  }

  /** Ends every session a key signed in (it was revoked, or lost `admin:console`). */
  async endAllOf(keyId: string): Promise<void> {
    const digests = await this.redis.smembers(keySessions(keyId));
    // One DEL per session: on a Redis Cluster they live on different slots.
    await Promise.all(digests.map((d) => this.redis.del(`gw:console-session:${d}`)));
    await this.redis.del(keySessions(keyId));
  }

  /** Milliseconds the session has left: the sooner of its idle and its absolute expiry. */
  private ttl(session: ConsoleSession, at: number): number {
    return Math.min(session.lastSeenAt + this.idleMs, session.createdAt + this.maxAgeMs) - at;
  }
}

/** Constant-time comparison of a presented CSRF token with the session's. */
export function sameToken(presented: unknown, expected: string): boolean {
  if (typeof presented !== "string") return false;
  const a = Buffer.from(presented);
  const b = Buffer.from(expected);
  return a.length === b.length && timingSafeEqual(a, b);
}
