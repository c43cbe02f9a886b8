import { LRUCache } from "lru-cache";
import { entryBound } from "../bounded-cache.ts";
import { type Clock, systemClock } from "../clock.ts";
import { type LastWriteRead, UNKNOWN_LAST_WRITE } from "./consistency-tokens.ts";

/** How a check used the cache: answered from it, asked SpiceDB, or could not use it (right after a write, Redis unreadable, or not trusted yet after a break). */
export const DECISION_CACHE_LOOKUPS = ["hit", "miss", "bypass"] as const;
/**
 * Why a kept decision was dropped: a write changed the resource's token, it
 * reached its age, a grant it may rest on ends, or the connection to Redis
 * broke since it was kept (a write made meanwhile may have left no token).
 */
export const DECISION_CACHE_INVALIDATIONS = ["write", "max_age", "grant_expiry", "redis_outage"] as const;

export interface DecisionCacheMetrics {
  lookup(outcome: (typeof DECISION_CACHE_LOOKUPS)[number]): void;
  invalidated(reason: (typeof DECISION_CACHE_INVALIDATIONS)[number]): void;
}

export interface DecisionCacheOptions {
  /** Most decisions kept (least recently used go first). */
  maxEntries: number;
  /** Longest a decision is kept, in ms: the staleness SpiceDB's `minimize_latency` already allows. */
  maxAgeMs: number;
  /** Its wall time is compared with grants' expiries; tests move it. */
  clock?: Clock;
  metrics?: DecisionCacheMetrics;
}

/**
 * A grant is taken to end this much before its recorded time: the clocks of
 * this host and SpiceDB's (which ends it) may differ a little.
 */
export const EXPIRY_CLOCK_MARGIN_MS = 1_000;

interface Entry {
  /** The resource's last-write token when the decision was asked ("" for none). */
  version: string;
  /** The token store's session then (`LastWrite.session`): a decision does not outlive a break of Redis's connection. */
  session: number;
  allowed: boolean;
  validUntil: number;
  /** Whether `validUntil` is a grant's expiry rather than the maximum age. */
  byExpiry: boolean;
}

/**
 * Decisions of `ResourceAuthorization.check`, in process, keyed by
 * (resource, subject, permission, caveat context). A decision is served only
 * while the resource's last-write token, read from Redis for every check
 * anyway, is the one it was asked under: every grant, revoke, register and
 * delete, by any replica or by the service, writes a new token, so a revoke
 * is seen by the very next check everywhere. Never right after a write (the
 * "recent" window, when checks are fully consistent), never longer than
 * `maxAgeMs` (writes made around the gateway, with `zed`, are seen no later
 * than that), never past the first expiry of an expiring grant on the
 * resource (read beside the check from `GrantExpiries`: any later grant
 * writes a new token). A resource without a token (never written through
 * the gateway, or not for `SPICEDB_ZEDTOKEN_TTL`) is the state "": any
 * write through the gateway, a delete too, leaves a token kept longer than
 * any decision, so "" never comes back while a decision is kept.
 * Nor past a break of the connection to Redis (the token store's session):
 * a write acknowledged while Redis was away left no token to compare, and a
 * Redis that restarted may have lost the one it had.
 */
export class DecisionCache {
  readonly clock: Clock;
  /**
   * Bounded by lru-cache (least recently used go first), without its TTL: an
   * entry's validity depends on the resource's last-write token read for each
   * check, and each way it ends is counted by its reason.
   */
  private readonly entries: LRUCache<string, Entry>;
  private readonly maxAgeMs: number;
  private readonly metrics: DecisionCacheMetrics | undefined;

  constructor(options: DecisionCacheOptions) {
    this.entries = new LRUCache(entryBound(options.maxEntries));
    this.maxAgeMs = options.maxAgeMs;
    this.clock = options.clock ?? systemClock;
    this.metrics = options.metrics;
  }

  /** Decisions kept now (some may no longer be valid). */
  get size(): number {
    return this.entries.size;
  }

  /** The decision kept under `key`, if it is still valid for the resource's last write `last`. */
  get(key: string, last: LastWriteRead): boolean | undefined {
    if (last === UNKNOWN_LAST_WRITE || last?.recent) {
      this.metrics?.lookup("bypass");
      return undefined;
    }
    const entry = this.entries.get(key);
    if (!entry) {
      this.metrics?.lookup("miss");
      return undefined;
    }
    const reason =
      entry.session !== (last?.session ?? 0)
        ? "redis_outage"
        : entry.version !== (last?.token ?? "")
          ? "write"
          : this.clock.wall() >= entry.validUntil
            ? entry.byExpiry
              ? "grant_expiry"
              : "max_age"
            : undefined;
    if (reason) {
      this.entries.delete(key);
      this.metrics?.invalidated(reason);
      this.metrics?.lookup("miss");
      return undefined;
    }
    this.metrics?.lookup("hit");
    return entry.allowed;
  }

  /**
   * Keeps a decision SpiceDB gave for the resource state `last`, read at
   * `askedAt` (before the check was sent), until the maximum age or
   * `nextExpiry`, the first end of a grant on the resource after `askedAt`
   * (`GrantExpiries`), whichever comes first. Not while `last` is recent or
   * unknown. When the ends of grants could not be read (`EXPIRIES_UNKNOWN`),
   * only a denial is kept: the schema has unions only, so a grant that ends
   * can take a permission away but never give one.
   */
  set(
    key: string,
    last: LastWriteRead,
    allowed: boolean,
    askedAt: number,
    nextExpiry: number | undefined | typeof EXPIRIES_UNKNOWN,
  ): void {
    if (last === UNKNOWN_LAST_WRITE || last?.recent) return;
    if (nextExpiry === EXPIRIES_UNKNOWN && allowed) return;
    const version = last?.token ?? "";
    let validUntil = askedAt + this.maxAgeMs;
    let byExpiry = false;
    if (typeof nextExpiry === "number" && nextExpiry - EXPIRY_CLOCK_MARGIN_MS < validUntil) {
      validUntil = nextExpiry - EXPIRY_CLOCK_MARGIN_MS;
      byExpiry = true;
    }
    if (validUntil <= this.clock.wall()) return;
    this.entries.set(key, { version, session: last?.session ?? 0, allowed, validUntil, byExpiry });
  }
}

/** The ends of a resource's grants could not be read: see `DecisionCache.set`. */
export const EXPIRIES_UNKNOWN = Symbol("grant expiries unknown");
