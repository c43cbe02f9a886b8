import { unauthorized } from "@gw/core/errors";
import { ASSERTION_HEADER, type InternalAssertions } from "@gw/core/internal-assertion";
import type { Principal } from "@gw/core/principal";
import type { RedisClient } from "@gw/core/redis";
import type { Request, RequestHandler, Response } from "express";

/**
 * The service's only door: a request must carry the gateway's assertion,
 * genuine, fresh, made for exactly this request and not seen before (its id
 * is remembered in Redis for a minute). Anything else is a 401: calling the
 * service directly gains nothing. `beside`: reads the request will need,
 * sent with the replay guard (`InternalAssertions.verifyOnce`).
 */
export function verifyAssertion(
  assertions: InternalAssertions,
  redis: RedisClient,
  beside?: (req: Request, res: Response, principal: Principal) => void,
): RequestHandler {
  return async (req, res, next) => {
    const assertion = req.get(ASSERTION_HEADER);
    if (!assertion) throw unauthorized("Requests must come through the gateway");
    const verified = await assertions.verifyOnce(
      assertion,
      { method: req.method, path: req.originalUrl, requestId: req.id },
      redis,
      beside && ((principal) => beside(req, res, principal)),
    );
    res.locals.principal = verified.principal;
    if (verified.admission) res.locals.admission = verified.admission;
    next();
  };
}
