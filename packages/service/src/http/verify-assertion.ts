import { unauthorized } from "@gw/core/errors";
import { ASSERTION_HEADER, type InternalAssertions } from "@gw/core/internal-assertion";
import type { Principal } from "@gw/core/principal";
import type { RedisClient } from "@gw/core/redis";
import type { Request, RequestHandler, Response } from "express";

declare global {
  namespace Express {
    interface Locals {
      /** The organization's guardrail version, read beside the replay guard (`Caller.guardrailVersion`). */
      guardrailVersion?: Promise<string | undefined>;
    }
  }
}

/** Model calls, known by their route: what they read beside the replay guard. */
export interface ModelCallDoor {
  matches(req: Request): boolean;
  /** Reads a model call will need, sent to Redis with its assertion's id (one round trip). */
  beside(req: Request, res: Response, principal: Principal): void;
}

/**
 * The service's only door: a request must carry the gateway's assertion,
 * genuine, fresh, made for exactly this request and not seen before (its id
 * is remembered in Redis for a minute). Anything else is a 401: calling the
 * service directly gains nothing. A model call (`modelCalls`) goes on while
 * Redis answers whether its assertion was seen: its body is parsed and
 * validated meanwhile, and its route's handler waits for the answer
 * (`res.locals.firstUse`, awaited by `defineRoute`), so nothing acts on a
 * replay; one refused before that (a 422) is answered without it.
 */
export function verifyAssertion(
  assertions: InternalAssertions,
  redis: RedisClient,
  modelCalls?: ModelCallDoor,
): RequestHandler {
  return async (req, res, next) => {
    const assertion = req.get(ASSERTION_HEADER);
    if (!assertion) throw unauthorized("Requests must come through the gateway");
    const modelCall = modelCalls?.matches(req) === true;
    const { verified, firstUse } = await assertions.verifyFirstUse(
      assertion,
      { method: req.method, path: req.originalUrl, requestId: req.id },
      redis,
      modelCall ? (principal) => modelCalls!.beside(req, res, principal) : undefined,
    );
    res.locals.principal = verified.principal;
    if (verified.admission) res.locals.admission = verified.admission;
    if (modelCall) {
      // Read by the route before its handler; an answer sent before that (a 422) leaves it unread.
      firstUse.catch(() => undefined);
      res.locals.firstUse = firstUse;
    } else await firstUse;
    next();
  };
}
