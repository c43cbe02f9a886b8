import { AppError } from "@gw/core/errors";
import {
  openAiRateLimitHeaders,
  policyHeader,
  principalOf,
  rateLimitHeader,
  secondsUntil,
} from "@gw/core/http";
import { type Limits, type UnitLimits, WINDOWS } from "@gw/core/limits";
import type { RequestHandler } from "express";
import { patchUnits, withDefaultRequestWindows } from "../api-keys/limits.ts";
import type { RequestWindows } from "./request-windows.ts";

/** Where the organizations' defaults for end users are read. */
export interface EndUserDefaults {
  cached(org: string): Promise<UnitLimits>;
}

/**
 * Step 3 of every API request: the key's request windows, counted once
 * before anything downstream runs, so a refused request reaches neither
 * SpiceDB, the service nor a model, and an admitted one counts once whatever
 * comes of it (404, 422, or a model call refused for tokens). Requests made
 * with a gateway JWT count against the key that issued it (the principal's
 * `keyId`). A key without request windows takes `DEFAULT_LIMITS`'; with
 * neither, requests are not counted and get no rate-limit headers.
 *
 * The resolved limits (the key's, end-user windows over the organization's
 * defaults) go to the service with every request, in the signed assertion
 * (`res.locals.admission`), whatever its path: wherever the service calls a
 * model, it reserves tokens, spend and the end user's request windows
 * (docs/api/rate-limits.md), without relying on the gateway to have
 * recognised a model call.
 */
export function rateLimit(
  limiter: RequestWindows,
  defaultLimits: Limits,
  endUserDefaults: EndUserDefaults,
): RequestHandler {
  return async (_req, res, next) => {
    const principal = principalOf(res);
    const keyLimits: Limits = res.locals.apiKey?.limits ?? {};
    const limits = withDefaultRequestWindows(keyLimits, defaultLimits);
    let orgDefaults: UnitLimits;
    try {
      orgDefaults = await endUserDefaults.cached(principal.org);
    } catch (err) {
      throw new AppError("service_unavailable", "Rate limiting is unavailable; try again", { cause: err });
    }
    const endUser = patchUnits(orgDefaults, keyLimits.endUser as Record<string, unknown> | undefined);
    if (Object.keys(endUser).length > 0) limits.endUser = endUser;
    else delete limits.endUser;
    res.locals.admission = { limits };
    if (!WINDOWS.some((w) => limits[w] !== undefined)) return next();

    const decision = await limiter.decide(principal.keyId, limits);
    res.setHeader("RateLimit-Policy", policyHeader(decision.windows));
    res.setHeader("RateLimit", rateLimitHeader(decision.windows));
    for (const [name, value] of Object.entries(openAiRateLimitHeaders("requests", decision.windows)))
      res.setHeader(name, value);
    if (decision.allowed) return next();
    throw new AppError("rate_limited", `Rate limit exceeded (${decision.refusedBy.window})`, {
      headers: { "Retry-After": String(secondsUntil(decision.refusedBy.resetMs)) },
    });
  };
}
