import { type Clock, systemClock } from "@gw/core/clock";
import { AppError } from "@gw/core/errors";
import type { UnitLimits } from "@gw/core/limits";
import { Lru } from "@gw/core/lru";
import type { RedisClient } from "@gw/core/redis";
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
  private readonly cacheMs: number;
  private readonly cache = new Lru<string, { limits: UnitLimits; until: number }>(MAX_CACHED_ORGS);

  private readonly clock: Clock;

  constructor(redis: RedisClient, cacheMs = 5_000, clock: Clock = systemClock) {
    this.redis = redis;
    this.cacheMs = cacheMs;
    this.clock = clock;
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
    const hit = this.cache.get(org);
    if (hit && hit.until > this.clock.now()) return hit.limits;
    let limits: UnitLimits;
    try {
      limits = await this.get(org);
    } catch (err) {
      if (!hit) throw err;
      this.cache.set(org, { limits: hit.limits, until: this.clock.now() + this.cacheMs });
      return hit.limits;
    }
    this.cache.set(org, { limits, until: this.clock.now() + this.cacheMs });
    return limits;
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
