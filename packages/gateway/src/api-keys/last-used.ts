import type { Clock } from "@gw/core/clock";
import type { Logger } from "@gw/core/logger";
import type { RequestHandler } from "express";
import type { ApiKeyStore } from "./store.ts";

/**
 * Notes when each key was last used, at most once per `everyMs` per key and
 * process, after the answer, so no request waits on it and a busy key costs
 * one Redis write a minute. What is shown is that precise.
 */
export function recordLastUsed(
  store: Pick<ApiKeyStore, "markUsed">,
  logger: Logger,
  /** Its wall time is what is noted. */
  clock: Clock,
  everyMs = 60_000,
): RequestHandler {
  const written = new Map<string, number>();
  return (_req, res, next) => {
    const key = res.locals.apiKey;
    if (key) {
      const at = clock.wall();
      const last = written.get(key.id);
      if (last === undefined || at - last >= everyMs) {
        written.set(key.id, at);
        if (written.size > 10_000) written.delete(written.keys().next().value!);
        store.markUsed(key.id, new Date(at)).catch((err: unknown) => {
          written.delete(key.id);
          logger.warn({ keyId: key.id, err: (err as Error).message }, "could not note the key's last use");
        });
      }
    }
    next();
  };
}
