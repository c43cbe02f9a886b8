import { AppError } from "@gw/core/errors";
import { principalOf } from "@gw/core/http";
import type { Logger } from "@gw/core/logger";
import type { Request, Response } from "express";
import type { Caller } from "../budgets/admit-model-call.ts";

/**
 * The HTTP side of a model call: what route files and stream writers do
 * with Express's `res` (the pipeline in `model-call.ts` knows nothing of it).
 */

/** A signal aborted when the caller goes away before the answer is finished: that stops the model's work. */
export function abortOnClose(res: Response): AbortSignal {
  const abort = new AbortController();
  res.on("close", () => {
    if (!res.writableFinished) abort.abort(new Error("client disconnected"));
  });
  return abort.signal;
}

/** Logs a stream that failed after it began: a catalogue error as a warning, anything else as an error. */
export function logStreamFailure(logger: Logger, res: Response, err: unknown, what: string): void {
  if (err instanceof AppError) logger.warn({ requestId: res.req.id, err }, `${what} stream failed`);
  else logger.error({ requestId: res.req.id, err }, `${what} stream failed`);
}

/** Opens a server-sent event stream: 200, no caching, no proxy buffering, the headers sent at once. */
export function openEventStream(res: Response): void {
  res
    .status(200)
    .set({ "Content-Type": "text/event-stream", "Cache-Control": "no-cache", "X-Accel-Buffering": "no" });
  res.flushHeaders();
}

/** Who makes a request's model call, as the pipeline takes it: the principal and the key's limits from the gateway's assertion. */
export function callerOf(req: Request, res: Response): Caller {
  // The gateway counted the key's request windows before forwarding.
  return {
    principal: principalOf(res),
    admission: res.locals.admission,
    requestsCounted: true,
    requestId: req.id,
  };
}
