import { AppError, type Limits, principalOf, WINDOWS } from "@gw/core";
import type { RequestHandler } from "express";
import { policyHeader, rateLimitHeader, secondsUntil } from "./headers.ts";
import type { QuotaLimiter } from "./quota.ts";

/**
 * Step 3 of every API request: the key's quotas, decided before anything
 * downstream runs, so a refused request reaches neither SpiceDB, the service
 * nor a model. Requests made with a gateway JWT count against the key that
 * issued it (the principal's `keyId`). A key without limits, and no
 * `DEFAULT_LIMITS`, is not limited and gets no rate-limit headers.
 */
export function rateLimit(limiter: QuotaLimiter, defaultLimits: Limits): RequestHandler {
  return async (_req, res, next) => {
    const principal = principalOf(res);
    const keyLimits = res.locals.apiKey?.limits ?? {};
    const limits = WINDOWS.some((w) => keyLimits[w] !== undefined) ? keyLimits : defaultLimits;
    if (!WINDOWS.some((w) => limits[w] !== undefined)) return next();

    const decision = await limiter.decide(principal.keyId, limits);
    res.setHeader("RateLimit-Policy", policyHeader(decision.windows));
    res.setHeader("RateLimit", rateLimitHeader(decision.windows));
    if (decision.allowed) return next();
    throw new AppError("rate_limited", `Rate limit exceeded (${decision.refusedBy.window})`, {
      headers: { "Retry-After": String(secondsUntil(decision.refusedBy.resetMs)) },
    });
  };
}
