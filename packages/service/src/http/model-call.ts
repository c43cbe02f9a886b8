import { CACHE_HEADER, principalOf } from "@gw/core/http";
import type { Request, Response } from "express";
import type { Caller } from "../budgets/admit-model-call.ts";
import type { EventSink } from "../calls/event-sink.ts";
import { type CacheResult, parseCacheDirective } from "../calls/response-cache.ts";

/**
 * The HTTP side of a model call: what routes do with Express's `res` (the
 * pipeline in `calls/model-call.ts` and the stream writers know nothing of it).
 */

/** A signal aborted when the caller goes away before the answer is finished: that stops the model's work. */
export function abortOnClose(res: Response): AbortSignal {
  const abort = new AbortController();
  res.on("close", () => {
    if (!res.writableFinished) abort.abort(new Error("client disconnected"));
  });
  return abort.signal;
}

/** An event stream on `res`: `open` answers 200, no caching, no proxy buffering, the headers sent at once. */
export function eventSinkOf(res: Response): EventSink {
  return {
    open() {
      res
        .status(200)
        .set({ "Content-Type": "text/event-stream", "Cache-Control": "no-cache", "X-Accel-Buffering": "no" });
      res.flushHeaders();
    },
    write: (text) => void res.write(text),
    end: () => void res.end(),
    get ended() {
      return res.writableEnded;
    },
    get requestId() {
      return res.req.id;
    },
  };
}

/** `x-guardrail-redacted`: the ids of the guardrails that redacted what the model read or what the client gets. */
export function guardrailHeaders(redactedBy: readonly string[]): Record<string, string> {
  return redactedBy.length > 0 ? { "x-guardrail-redacted": redactedBy.join(",") } : {};
}

/**
 * Who makes a request's model call, as the pipeline takes it: the principal
 * and the key's limits from the gateway's assertion. Only `modelRoute`
 * (`http/model-route.ts`) asks for it: a route gets a caller by being
 * declared as one that calls a model.
 */
export function callerOf(req: Request, res: Response): Caller {
  // The gateway counted the key's request windows before forwarding.
  return {
    principal: principalOf(res),
    admission: res.locals.admission,
    requestsCounted: true,
    requestId: req.id,
    cache: parseCacheDirective(req.headersDistinct[CACHE_HEADER]),
    guardrailVersion: res.locals.guardrailVersion,
  };
}

/** `X-Gateway-Cache` as the OpenAPI document declares it on the answers of the routes the cache may answer. */
export const CACHE_HEADER_DOC = {
  "X-Gateway-Cache": {
    description:
      "What the response cache did: `hit`, `miss` or `bypass` (docs/api/cache.md). A request may send `X-Gateway-Cache: off` or `refresh`.",
    schema: { enum: ["hit", "miss", "bypass"] },
  },
};

/** `X-Gateway-Cache`: what the response cache did for the answer (`hit`, `miss` or `bypass`). */
export function cacheHeaders(result: CacheResult | undefined): Record<string, string> {
  return { [CACHE_HEADER]: result ?? "bypass" };
}
