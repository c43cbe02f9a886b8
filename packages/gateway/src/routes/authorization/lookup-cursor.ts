import { createHmac, createSecretKey, hkdfSync, type KeyObject, timingSafeEqual } from "node:crypto";
import type { ResourceType, Role } from "@gw/core/authz";
import { type Clock, systemClock } from "@gw/core/clock";
import { ValidationFailed } from "@gw/core/errors";

/** What a cursor is bound to: the principal, and the query it continues. */
export interface CursorBinding {
  org: string;
  user: string;
  resourceType: ResourceType;
  role: Role;
  limit: number;
}

/**
 * The `next_cursor` of lookups: "after resource id X", with its expiry, and an
 * HMAC over both and the binding (principal, type, role, limit). Nothing in it
 * is tied to a SpiceDB revision, so writes in the organization never break it;
 * a cursor changed by a single bit, presented by another principal or for
 * another query, or past its time is a 422 at `["query","cursor"]`. Every
 * replica derives the same key from the internal assertion secret.
 */
export class LookupCursors {
  /** A key object: an HMAC under a plain buffer or string imports its key on every call, seven times the cost. */
  private readonly key: KeyObject;
  private readonly ttlMs: number;
  /** Its wall time dates and ends cursors (tests move it instead of waiting). */
  private readonly clock: Clock;

  constructor(secret: string, ttlSeconds: number, clock: Clock = systemClock) {
    this.key = createSecretKey(Buffer.from(hkdfSync("sha256", secret, "", "gateway lookup cursor v1", 32)));
    this.ttlMs = ttlSeconds * 1000;
    this.clock = clock;
  }

  /** The cursor of the page after `after`, for the same principal and query. */
  issue(binding: CursorBinding, after: string): string {
    const expires = Math.floor((this.clock.wall() + this.ttlMs) / 1000);
    const payload = Buffer.from(JSON.stringify([after, expires])).toString("base64url");
    return `${payload}.${this.mac(binding, after, expires)}`;
  }

  /** The resource id a cursor continues after, if it is genuine, this query's, and not expired. */
  open(binding: CursorBinding, cursor: string): string {
    const [payload, mac, extra] = cursor.split(".");
    if (!payload || !mac || extra !== undefined) throw invalid(cursor, "invalid cursor");
    let after: unknown;
    let expires: unknown;
    try {
      [after, expires] = JSON.parse(Buffer.from(payload, "base64url").toString("utf8"));
    } catch {
      throw invalid(cursor, "invalid cursor");
    }
    if (typeof after !== "string" || typeof expires !== "number") throw invalid(cursor, "invalid cursor");
    const expected = Buffer.from(this.mac(binding, after, expires));
    const given = Buffer.from(mac);
    if (given.length !== expected.length || !timingSafeEqual(given, expected))
      throw invalid(cursor, "invalid cursor");
    if (expires * 1000 <= this.clock.wall()) throw invalid(cursor, "expired cursor, start again without one");
    return after;
  }

  private mac(binding: CursorBinding, after: string, expires: number): string {
    const { org, user, resourceType, role, limit } = binding;
    return createHmac("sha256", this.key)
      .update(JSON.stringify([org, user, resourceType, role, limit, after, expires]))
      .digest("base64url");
  }
}

const invalid = (input: string, problem: string) =>
  new ValidationFailed([
    { loc: ["query", "cursor"], msg: `Value error, ${problem}`, type: "value_error", input },
  ]);
