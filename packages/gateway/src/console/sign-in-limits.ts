import { isIPv4, isIPv6 } from "node:net";
import { AppError, serviceUnavailable } from "@gw/core/errors";
import type { RedisClient } from "@gw/core/redis";
import { RateLimiterRedis, RateLimiterRes } from "rate-limiter-flexible";

/** Which count refused a sign-in. */
export type SignInLimit = "address" | "organization";

export interface SignInLimitOptions {
  /** Failed sign-ins one client address may make per window. */
  perAddress: number;
  /** Failed sign-ins with keys of one organization per window, from any address. */
  perOrg: number;
  /** The window, in milliseconds (whole seconds are counted). */
  windowMs: number;
}

/** Too many failed sign-ins: 429 with `Retry-After` (until the refusing window ends). */
export class SignInLimited extends AppError {
  readonly limit: SignInLimit;
  readonly retryAfterSeconds: number;
  constructor(limit: SignInLimit, retryAfterSeconds: number) {
    super("rate_limited", "Too many failed sign-in attempts; try again later", {
      headers: { "Retry-After": String(retryAfterSeconds) },
    });
    this.name = "SignInLimited";
    this.limit = limit;
    this.retryAfterSeconds = retryAfterSeconds;
  }
}

/** One sign-in being tried: counted against its address, then against the organization of the key it names. */
export interface SignInAttempt {
  /** Counts the attempt against `org` too (the key it presented is one of that organization's). */
  naming(org: string): Promise<void>;
  /** The sign-in succeeded: it counts against nothing. */
  succeeded(): Promise<void>;
}

/**
 * Failed admin console sign-ins, counted in Redis (rate-limiter-flexible's
 * `RateLimiterRedis`: one key a count, fixed windows of Redis's own expiry),
 * so the limits hold across gateway replicas (docs/console.md, "Sign in"):
 *
 * - per client address: every attempt counts when it begins, before the key
 *   is looked up, and a success gives its count back; an IPv6 address counts
 *   as its /64, which one client usually holds whole;
 * - per organization: a secret names an organization only when it is a key
 *   the gateway knows (revoked, expired, without `admin:console`, or valid);
 *   an unknown secret names none, so a stranger cannot count against an
 *   organization without holding one of its keys.
 *
 * Counting before the outcome is known (and giving a success back) keeps
 * concurrent attempts from passing a limit together. Redis unreachable: 503
 * (sessions live in Redis too, so no sign-in could succeed).
 */
export class SignInLimits {
  private readonly byAddress: RateLimiterRedis;
  private readonly byOrg: RateLimiterRedis;

  constructor(redis: RedisClient, options: SignInLimitOptions) {
    const duration = Math.max(1, Math.ceil(options.windowMs / 1000));
    this.byAddress = new RateLimiterRedis({
      storeClient: redis,
      keyPrefix: "gw:console-sign-in:address",
      points: options.perAddress,
      duration,
    });
    this.byOrg = new RateLimiterRedis({
      storeClient: redis,
      keyPrefix: "gw:console-sign-in:org",
      points: options.perOrg,
      duration,
    });
  }

  /** Counts an attempt from `address` (the request's client address); `SignInLimited` once it has too many. */
  async attempt(address: string): Promise<SignInAttempt> {
    const from = addressKey(address);
    await consume(this.byAddress, from, "address");
    let named: string | undefined;
    return {
      naming: async (org) => {
        await consume(this.byOrg, org, "organization");
        named = org;
      },
      succeeded: async () => {
        await Promise.all([
          giveBack(this.byAddress, from),
          named === undefined ? undefined : giveBack(this.byOrg, named),
        ]);
      },
    };
  }
}

async function consume(limiter: RateLimiterRedis, key: string, limit: SignInLimit): Promise<void> {
  try {
    await limiter.consume(key);
  } catch (err) {
    if (err instanceof RateLimiterRes)
      throw new SignInLimited(limit, Math.max(1, Math.ceil(err.msBeforeNext / 1000)));
    throw serviceUnavailable("Sign-in is unavailable; try again", err);
  }
}

async function giveBack(limiter: RateLimiterRedis, key: string): Promise<void> {
  try {
    await limiter.reward(key);
  } catch {
    // Not given back (Redis away): the attempt stays counted until its window ends.
  }
}

/** The count an address falls under: an IPv4 address (mapped into IPv6 or not) as it is, IPv6 by its /64. */
export function addressKey(address: string): string {
  const bare = address.replace(/%.*$/, "").toLowerCase();
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/.exec(bare);
  if (mapped) return mapped[1]!;
  if (isIPv4(bare) || !isIPv6(bare)) return bare;
  const [head = "", tail] = bare.split("::");
  const left = head ? head.split(":") : [];
  const right = tail === undefined || tail === "" ? [] : tail.split(":");
  const groups =
    tail === undefined
      ? left
      : [...left, ...Array<string>(8 - left.length - right.length).fill("0"), ...right];
  return `${groups
    .slice(0, 4)
    .map((g) => Number.parseInt(g, 16).toString(16))
    .join(":")}::/64`;
}
