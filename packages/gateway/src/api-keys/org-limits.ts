import { entryBound } from "@gw/core/bounded-cache";
import { type Clock, systemClock } from "@gw/core/clock";
import { AppError } from "@gw/core/errors";
import type { UnitLimits } from "@gw/core/limits";
import type { RedisClient } from "@gw/core/redis";
import { LRUCache } from "lru-cache";
import { patchUnits } from "./limits.ts";
import type { UpdateEndUserLimitsInput } from "./schema.ts";

const orgLimitsKey = (org: string) => `gw:org:${org}:end-user-limits`;

// Replaces the record only if nobody changed it since it was read.
const CAS_SCRIPT = `
local current = redis.call('GET', KEYS[1]) or ''
if current ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[2])
return 1
`;

const MAX_ATTEMPTS = 10;
const MAX_CACHED_ORGS = 10_000;

/**
 * An organization's default limits for the end users of its keys
 * (`gw:org:<org>:end-user-limits`, JSON). A key's own `endUser` windows
 * take precedence window by window. Readers cache a copy for `cacheMs`, so a
 * change reaches every gateway within that time.
 */
export class OrgLimitsStore {
  private readonly redis: RedisClient;
  /**
   * Copies by organization, for `cacheMs` on the clock; concurrent misses of
   * one organization share one read, and a read that fails serves the stale
   * copy (kept for that) if there is one.
   */
  private readonly cache: LRUCache<string, UnitLimits>;

  constructor(redis: RedisClient, cacheMs = 5_000, clock: Clock = systemClock) {
    this.redis = redis;
    this.cache = new LRUCache<string, UnitLimits>({
      ...entryBound(MAX_CACHED_ORGS),
      // lru-cache calls a copy stale once its age exceeds `ttl` (so a copy serves for less than cacheMs),
      // and reads 0 as "never stale": with cacheMs 0 every read asks Redis.
      ttl: Math.max(cacheMs - 1, 1),
      ttlResolution: 0,
      perf: { now: () => clock.now() },
      fetchMethod: (org) => this.get(org),
      // A failed read leaves the stale copy in place, for `cached` to fall back on.
      noDeleteOnFetchRejection: true,
      // A change here drops the copy while reads may be in flight: they answer what they read (from before
      // the change) instead of failing (a 503 for every request of the organization meanwhile), and what
      // they read is not kept, so the next read asks Redis again.
      ignoreFetchAbort: true,
    });
  }

  async get(org: string): Promise<UnitLimits> {
    const json = await this.redis.get(orgLimitsKey(org));
    return json ? (JSON.parse(json) as UnitLimits) : {};
  }

  /**
   * `get`, from a copy at most `cacheMs` old; when Redis cannot be asked, an
   * older copy (as the key lookup's stale-if-error; Redis is asked again
   * `cacheMs` later, so an outage does not slow every request), else the error.
   */
  async cached(org: string): Promise<UnitLimits> {
    try {
      return (await this.cache.fetch(org)) ?? {};
    } catch (err) {
      const stale = this.cache.get(org, { allowStale: true });
      if (stale === undefined) throw err;
      // Served as fresh for another `cacheMs`: Redis is asked again then, not on every request meanwhile.
      this.cache.set(org, stale);
      return stale;
    }
  }

  /** Applies a change (compare-and-set, retried when another change came between). */
  async update(org: string, patch: UpdateEndUserLimitsInput): Promise<UnitLimits> {
    for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
      const before = (await this.redis.get(orgLimitsKey(org))) ?? "";
      const limits = patchUnits(before ? (JSON.parse(before) as UnitLimits) : {}, patch);
      const swapped = await this.redis.eval(CAS_SCRIPT, 1, orgLimitsKey(org), before, JSON.stringify(limits));
      if (swapped === 1) {
        this.cache.delete(org);
        return limits;
      }
    }
    throw new AppError("conflict", `The end-user limits of ${org} are being changed concurrently; try again`);
  }
}
