import { AppError } from "@gw/core/errors";
import { isModelCall, openAiRateLimitHeaders, principalOf } from "@gw/core/http";
import { hasBudgets, type Limits, type UnitLimits, WINDOWS } from "@gw/core/limits";
import type { RequestHandler } from "express";
import { patchUnits } from "../api-keys/limits.ts";
import { policyHeader, rateLimitHeader, secondsUntil } from "./headers.ts";
import type { QuotaLimiter } from "./quota.ts";

/** Where the organizations' defaults for end users are read. */
export interface EndUserDefaults {
  cached(org: string): Promise<UnitLimits>;
}

/**
 * Step 3 of every API request: the key's request windows, decided before
 * anything downstream runs, so a refused request reaches neither SpiceDB,
 * the service nor a model. Requests made with a gateway JWT count against
 * the key that issued it (the principal's `keyId`). A key without request
 * windows takes `DEFAULT_LIMITS`'; with neither, requests are not counted and
 * get no rate-limit headers.
 *
 * A model call of a key with token or spend budgets (its own or its end
 * users') is not counted here: the service counts its request windows
 * together with the tokens and spend of the prompt it builds, in one Redis
 * script (docs/api/rate-limits.md, "Token and spend budgets"). The resolved limits go to the service in
 * the signed assertion either way (`res.locals.admission`).
 */
export function rateLimit(
  limiter: QuotaLimiter,
  defaultLimits: Limits,
  endUserDefaults: EndUserDefaults,
): RequestHandler {
  return async (req, res, next) => {
    const principal = principalOf(res);
    const keyLimits: Limits = res.locals.apiKey?.limits ?? {};
    const ownRequests = WINDOWS.some((w) => keyLimits[w] !== undefined);
    const limits: Limits = { ...keyLimits };
    for (const w of WINDOWS) limits[w] = ownRequests ? keyLimits[w] : defaultLimits[w];
    const modelCall = isModelCall(req.method, req.originalUrl);
    if (modelCall) {
      let orgDefaults: UnitLimits;
      try {
        orgDefaults = await endUserDefaults.cached(principal.org);
      } catch (err) {
        throw new AppError("service_unavailable", "Rate limiting is unavailable; try again", { cause: err });
      }
      const endUser = patchUnits(orgDefaults, keyLimits.endUser as Record<string, unknown> | undefined);
      if (Object.keys(endUser).length > 0) limits.endUser = endUser;
    }
    const counted = WINDOWS.some((w) => limits[w] !== undefined) && !(modelCall && hasBudgets(limits));
    res.locals.admission = { limits, requestsCounted: counted };
    if (!counted) return next();

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
