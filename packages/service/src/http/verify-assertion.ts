import { unauthorized } from "@gw/core/errors";
import { ASSERTION_HEADER, type InternalAssertions } from "@gw/core/internal-assertion";
import type { RedisClient } from "@gw/core/redis";
import type { RequestHandler } from "express";

/**
 * The service's only door: a request must carry the gateway's assertion,
 * genuine, fresh, made for exactly this request and not seen before (its id
 * is remembered in Redis for a minute). Anything else is a 401: calling the
 * service directly gains nothing.
 */
export function verifyAssertion(assertions: InternalAssertions, redis: RedisClient): RequestHandler {
  return async (req, res, next) => {
    const assertion = req.get(ASSERTION_HEADER);
    if (!assertion) throw unauthorized("Requests must come through the gateway");
    const verified = await assertions.verifyOnce(
      assertion,
      { method: req.method, path: req.originalUrl, requestId: req.id },
      redis,
    );
    res.locals.principal = verified.principal;
    if (verified.admission) res.locals.admission = verified.admission;
    next();
  };
}
