import { AppError, serviceUnavailable } from "@gw/core/errors";
import type { RedisClient } from "@gw/core/redis";
import { RateLimiterRedis, RateLimiterRes } from "rate-limiter-flexible";
import { addressKey } from "../console/sign-in-limits.ts";

/**
 * Dynamic client registrations per client address, counted in Redis (one
 * count for every replica; an IPv6 address counts as its /64, as the console's
 * sign-in limits do): `MCP_OAUTH_REGISTRATIONS_PER_ADDRESS` per
 * `MCP_OAUTH_REGISTRATION_WINDOW`. Redis unable to count: 503, not a pass.
 */
export class RegistrationLimits {
  private readonly byAddress: RateLimiterRedis;

  constructor(redis: RedisClient, options: { perAddress: number; windowMs: number }) {
    this.byAddress = new RateLimiterRedis({
      storeClient: redis,
      keyPrefix: "gw:oauth-register:address",
      points: options.perAddress,
      duration: Math.max(1, Math.ceil(options.windowMs / 1000)),
    });
  }

  /** Counts a registration from `address`; 429 `rate_limited` with `Retry-After` past the limit. */
  async attempt(address: string): Promise<void> {
    try {
      await this.byAddress.consume(addressKey(address));
    } catch (err) {
      if (err instanceof RateLimiterRes) {
        const retryAfter = Math.max(1, Math.ceil(err.msBeforeNext / 1000));
        throw new AppError(
          "rate_limited",
          "Too many client registrations from this address; try again later",
          {
            headers: { "Retry-After": String(retryAfter) },
          },
        );
      }
      throw serviceUnavailable("Client registration is unavailable; try again", err);
    }
  }
}
