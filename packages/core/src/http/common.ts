import { randomUUID } from "node:crypto";
import type { IncomingMessage } from "node:http";
import express, { type ErrorRequestHandler, type RequestHandler } from "express";
import { AppError, cutText, errorBody, isOpenAISurface, toAppError, ValidationFailed } from "../errors.ts";
import { type Logger, unredacted } from "../logger.ts";
import type { Metrics } from "../metrics.ts";
import { endSpan, startServerSpan, traceIdOf } from "../tracing.ts";
import { inTurn, LARGE_WORK_CHARS } from "../turns.ts";
import { RouteLabels, type RouteTemplate, routesOf } from "./route-labels.ts";

/** Largest JSON body accepted; larger ones get 413. */
export const BODY_LIMIT_BYTES = 1024 * 1024;
/** Deepest nesting of arrays and objects accepted in a JSON body; deeper ones get 422 `json_invalid`. */
export const MAX_JSON_DEPTH = 64;

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

declare global {
  namespace Express {
    interface Request {
      id: string;
    }
  }
}

/**
 * What every process puts in front of its routes: a request id (kept from a
 * well-formed incoming `X-Request-Id`, else new) echoed on every response,
 * and an access log line and HTTP metrics when the response finishes, with
 * the endpoint's route template (never the raw path: ids would explode
 * cardinality). `forwardedRoutes` are endpoints served elsewhere (the gateway
 * forwards to the service), labelled by their templates too. `OPTIONS` is
 * answered here for every endpoint: 204 with `Allow`, no body (with
 * `crossOrigin`'s headers, a CORS preflight's answer).
 */
export function useRequestBasics(
  app: express.Express,
  logger: Logger,
  metrics: Metrics,
  forwardedRoutes: readonly RouteTemplate[] = [],
  /**
   * The access line's level: `info`, or `debug` where another process
   * already writes one for the same request (the service, behind the
   * gateway: one access line per request, not two).
   */
  accessLevel: "info" | "debug" = "info",
  /**
   * Runs right after the request id is set, before `OPTIONS` is answered: the gateway's
   * cross-origin headers for the endpoints browser-based MCP clients call, preflights included.
   */
  crossOrigin?: RequestHandler,
): void {
  // The access line carries only the fields below, none of them a secret.
  const access = unredacted(logger);
  const writeAccess = accessLevel === "info" ? access.info.bind(access) : access.debug.bind(access);
  const accessOn = access.isLevelEnabled(accessLevel);
  // Built at the first answer, when every route is registered.
  let labels: RouteLabels | undefined;
  const labelsOf = () => {
    labels ??= new RouteLabels([...routesOf(app), ...forwardedRoutes]);
    return labels;
  };
  const routeOf = (req: express.Request) => labelsOf().label(req.method, req.originalUrl);
  // For `notFoundHandler`: a known path asked with another method is a 405, not a 404.
  app.locals.allowedMethods = (url: string) => labelsOf().allowed(url);
  // The metric children of each method, route and status: a label object per observation costs more
  // than the observation (prom-client hashes and validates it every time).
  const children = new Map<string, { requests: { inc(): void }; duration: { observe(v: number): void } }>();
  const childrenOf = (method: string, route: string, status: string) => {
    const key = `${method}\u0000${route}\u0000${status}`;
    let child = children.get(key);
    if (!child) {
      child = {
        requests: metrics.httpRequests.labels(method, route, status),
        duration: metrics.httpDuration.labels(method, route),
      };
      children.set(key, child);
    }
    return child;
  };
  app.disable("x-powered-by");
  app.set("etag", false);
  app.use((req, res, next) => {
    const incoming = req.get("x-request-id");
    req.id = incoming && REQUEST_ID.test(incoming) ? incoming : randomUUID();
    res.setHeader("X-Request-Id", req.id);
    const started = process.hrtime.bigint();
    let span: ReturnType<typeof startServerSpan>;
    res.on("finish", () => {
      const seconds = Number(process.hrtime.bigint() - started) / 1e9;
      const route = routeOf(req);
      const child = childrenOf(req.method, route, String(res.statusCode));
      child.requests.inc();
      child.duration.observe(seconds);
      const principal = res.locals.principal as { org?: string; keyId?: string } | undefined;
      if (span) {
        span.updateName(`${req.method} ${route}`);
        endSpan(span, res.statusCode >= 500 ? `HTTP ${res.statusCode}` : undefined, {
          "http.route": route,
          "http.response.status_code": res.statusCode,
        });
      }
      if (!accessOn) return;
      writeAccess(
        {
          requestId: req.id,
          method: req.method,
          route,
          status: res.statusCode,
          durationMs: Math.round(seconds * 1e6) / 1e3,
          org: principal?.org,
          keyId: principal?.keyId,
          ...(span ? { trace_id: traceIdOf(span) } : {}),
        },
        "request",
      );
    });
    res.on("close", () => {
      if (span && !res.writableFinished) endSpan(span, "the caller went away");
    });
    // With tracing on, the rest of the request runs in its server span (parent: the caller's `traceparent`).
    span = startServerSpan(
      req.headers,
      req.method,
      { "http.request.method": req.method, "gw.request_id": req.id },
      next,
    );
  });
  if (crossOrigin) app.use(crossOrigin);
  // Express would answer OPTIONS itself, in text/plain. Here: 204 and `Allow` for a path some endpoint
  // serves (what the API documents anyway, before authentication); any other path goes on to its 404.
  app.use((req, res, next) => {
    if (req.method !== "OPTIONS") return next();
    const allowed = labelsOf().allowed(req.originalUrl);
    if (allowed.length === 0) return next();
    res
      .set("Allow", [...allowed, "OPTIONS"].sort().join(", "))
      .status(204)
      .end();
  });
}

// Any JSON value, not body-parser's default of objects and arrays only: a scalar is JSON, so it is the
// route's schema that refuses it (422 `dict_type` for an object), never `json_invalid`.
const parseJson = express.json({ limit: BODY_LIMIT_BYTES, strict: false, verify: refuseDeepOrNonUtf8 });
const readOtherBody = express.raw({ type: () => true, limit: BODY_LIMIT_BYTES });
const readJsonBytes = express.raw({ type: () => true, limit: BODY_LIMIT_BYTES });

/**
 * A JSON body this large, or of a length not declared (chunked), is read as
 * bytes and parsed in a turn of its own (`inTurn`): its decoding, depth scan
 * and `JSON.parse` (several milliseconds a MiB) never run back to back with
 * other large bodies' while small requests wait.
 */
export const LARGE_BODY_BYTES = LARGE_WORK_CHARS;

/**
 * JSON bodies up to 1 MiB and `MAX_JSON_DEPTH` levels, UTF-8, for routes that
 * read them. A body of any other type is refused with 415 rather than
 * dropped; a request without a body needs no Content-Type. Not applied
 * globally: the gateway streams forwarded bodies to the service untouched.
 */
export const jsonBody: RequestHandler = (req, res, next) => {
  if (req.is("application/json") !== false) {
    const declared = req.headers["content-length"];
    const large =
      declared === undefined
        ? req.headers["transfer-encoding"] !== undefined
        : Number(declared) >= LARGE_BODY_BYTES;
    return large ? parseLargeJson(req, res, next) : parseJson(req, res, next);
  }
  // Read it to tell an empty body (a bodiless POST forwarded chunked) from a real one.
  readOtherBody(req, res, (err?: unknown) => {
    if (err) return next(err);
    const read: unknown = req.body;
    req.body = undefined;
    // The parser reads nothing from a request that has already ended (the client closed its side).
    if (!Buffer.isBuffer(read))
      return next(new AppError("bad_request", "The request body could not be read: the request had ended"));
    next(
      read.length === 0
        ? undefined
        : new AppError(
            "unsupported_media_type",
            "Request bodies must be JSON (Content-Type: application/json)",
          ),
    );
  });
};

/**
 * `parseJson` for a large body, with the same outcomes (any JSON value,
 * an empty body as `{}`; the same limit,
 * decompression, charset rule and depth scan), the bytes read first and the
 * rest done in a turn of its own.
 */
const parseLargeJson: RequestHandler = (req, res, next) => {
  readJsonBytes(req, res, (err?: unknown) => {
    if (err) return next(err);
    const bytes: unknown = req.body;
    req.body = undefined;
    if (!Buffer.isBuffer(bytes)) return next();
    inTurn(() => {
      refuseDeepOrNonUtf8(req, res, bytes, charsetOf(req));
      return jsonOf(
        bytes.toString("utf8", bytes[0] === 0xef && bytes[1] === 0xbb && bytes[2] === 0xbf ? 3 : 0),
      );
    }).then(
      (body) => {
        req.body = body;
        next();
      },
      (failure: Error & { type?: string }) => {
        // As body-parser types its errors: a charset refused, else a body that is not JSON.
        failure.type ??= "entity.parse.failed";
        next(failure);
      },
    );
  });
};

/** The request's declared charset, `utf-8` when none (as body-parser reads it). */
function charsetOf(req: IncomingMessage): string {
  const type = req.headers["content-type"] ?? "";
  return /;\s*charset\s*=\s*"?([^";\s]+)/i.exec(type)?.[1]?.toLowerCase() ?? "utf-8";
}

/** As body-parser reads JSON without `strict`: an empty body is `{}`, any other any JSON value. */
function jsonOf(text: string): unknown {
  return text.length === 0 ? {} : JSON.parse(text);
}

/**
 * Scans the raw body before it is parsed: nesting beyond `MAX_JSON_DEPTH`
 * would exhaust the stack of whatever walks the value later (validation, the
 * 422 that echoes it). Counting brackets outside strings on the bytes is
 * exact for UTF-8, where no multi-byte sequence contains an ASCII byte. A
 * string is skipped with a native search for its closing quote, so the scan
 * costs next to nothing for the bodies that are large because of their text
 * (a byte-by-byte loop over 1 MiB took several milliseconds of the event loop).
 */
function refuseDeepOrNonUtf8(_req: IncomingMessage, _res: unknown, body: Buffer, encoding: string): void {
  if (encoding.toLowerCase() !== "utf-8" && encoding.toLowerCase() !== "utf8") {
    throw Object.assign(new Error(`unsupported charset "${encoding.toUpperCase()}"`), {
      type: "charset.unsupported",
    });
  }
  let depth = 0;
  for (let i = 0; i < body.length; i++) {
    const byte = body[i];
    if (byte === 0x22) i = closingQuote(body, i + 1);
    else if (byte === 0x5b || byte === 0x7b) {
      if (++depth > MAX_JSON_DEPTH) {
        throw Object.assign(new Error(`JSON nested deeper than ${MAX_JSON_DEPTH} levels`), {
          type: "entity.parse.failed",
        });
      }
    } else if (byte === 0x5d || byte === 0x7d) depth--;
  }
}

/**
 * Where the string that starts at `from` ends: its first quote preceded by
 * an even number of backslashes (the end of the body for an unterminated
 * one, which the parser refuses). Each backslash is looked at once at most:
 * the runs before two quotes never overlap.
 */
function closingQuote(body: Buffer, from: number): number {
  for (let quote = body.indexOf(0x22, from); quote !== -1; quote = body.indexOf(0x22, quote + 1)) {
    let backslashes = 0;
    while (quote - backslashes - 1 >= from && body[quote - backslashes - 1] === 0x5c) backslashes++;
    if (backslashes % 2 === 0) return quote;
  }
  return body.length;
}

/** The most of a request's path a message echoes: a path may be as long as the request line allows. */
const ECHOED_PATH_CHARS = 200;
const echoedPath = (path: string) => cutText(path, ECHOED_PATH_CHARS);

/**
 * 404 in JSON for any route nobody served; 405 with `Allow` for a path some
 * endpoint serves with other methods (known from `useRequestBasics`).
 */
export const notFoundHandler: RequestHandler = (req, _res, next) => {
  const allowedMethods = req.app.locals.allowedMethods as ((url: string) => string[]) | undefined;
  const allowed = allowedMethods?.(req.originalUrl) ?? [];
  if (allowed.length > 0 && !allowed.includes(req.method)) {
    const allow = [...allowed, "OPTIONS"].sort().join(", ");
    return next(
      new AppError(
        "method_not_allowed",
        `${req.method} is not allowed on ${echoedPath(req.path)}; allowed: ${allow}`,
        {
          headers: { Allow: allow },
        },
      ),
    );
  }
  next(
    new AppError("not_found", `No route for ${req.method} ${echoedPath(req.path)}`, { reason: "no_route" }),
  );
};

/** The one error middleware: catalogue errors become their bodies, anything else a 500 with only the request id. */
export function errorHandler(logger: Logger): ErrorRequestHandler {
  return (err, req, res, _next) => {
    const appError = fromFramework(err, req) ?? err;
    if (clientGone(req, res)) {
      // Nobody to answer: not a fault of this process (whatever error the abort surfaced as).
      logger.info(
        { requestId: req.id, err: (err as Error | undefined)?.message },
        "client closed the request",
      );
      res.destroy();
      return;
    }
    if (res.headersSent) {
      logger.error({ requestId: req.id, err }, "error after the response started");
      res.destroy();
      return;
    }
    const openai = isOpenAISurface(req.originalUrl);
    if (appError instanceof AppError) {
      if (appError.status >= 500) logger.warn({ requestId: req.id, err: appError }, appError.message);
      res.set(appError.headers).status(appError.status).json(errorBody(appError, { openai }));
      return;
    }
    const internal = unexpectedError(err, req.id, logger);
    res
      .status(500)
      .json(
        openai
          ? errorBody(internal, { openai })
          : { error: "Internal Server Error", requestId: req.id, code: "internal" },
      );
  };
}

/**
 * An error no handler expected (a bug, a library's throw): logged whole with the request's id, and
 * answered as an internal error whose message names only that id, never the error's own text.
 */
export function unexpectedError(err: unknown, requestId: string, logger: Logger): AppError {
  logger.error({ requestId, err }, "unhandled error");
  return toAppError(err, `Internal Server Error (request ${requestId})`);
}

/** The client closed its connection before its answer was complete. */
function clientGone(req: IncomingMessage, res: express.Response): boolean {
  return !res.writableFinished && (req.socket?.destroyed === true || res.destroyed);
}

/**
 * V8's JSON.parse messages quote up to ten characters of the text on each
 * side of the error (`Unexpected token 's', ..."api_key": sk-test-0b"... is
 * not valid JSON`): a body may hold a secret there, so the quote is left out.
 */
const withoutQuote = (message: string) =>
  message.replace(/, (?:\.\.\.)?".*"(?:\.\.\.)? is not valid JSON$/s, " in the JSON text");

/**
 * Express's router and body-parser signal the client's mistakes with their
 * own errors (a `type`, or a `status` on a plain error); here they become
 * catalogue errors, never a 500.
 */
/**
 * The catalogue's error for one Express or body-parser raised (an unreadable body, a path it could not
 * decode, …); undefined for an `AppError` or anything else. The error handler answers with it.
 */
export function fromFramework(err: unknown, req: IncomingMessage): AppError | undefined {
  if (err instanceof AppError) return undefined;
  const { type, status } = (err ?? {}) as { type?: string; status?: number };
  // The router could not decode a path parameter.
  if (err instanceof URIError && status === 400) {
    return new AppError("bad_request", "The request path has malformed percent-encoding");
  }
  // body-parser's decompression stream failed (its own errors have a type): the body is not what
  // Content-Encoding says.
  const encoding = req.headers["content-encoding"];
  if (type === undefined && status === 400 && encoding) {
    return new AppError("bad_request", `The request body is not valid ${encoding} data`);
  }
  switch (type) {
    case "entity.parse.failed":
      return new ValidationFailed([
        {
          loc: ["body"],
          msg: "JSON decode error",
          type: "json_invalid",
          ctx: { error: withoutQuote((err as Error).message) },
        },
      ]);
    case "entity.too.large":
      return new AppError("payload_too_large", `Request body exceeds ${BODY_LIMIT_BYTES} bytes`);
    case "encoding.unsupported":
    case "charset.unsupported":
      return new AppError("unsupported_media_type", (err as Error).message);
    case "request.aborted":
    case "request.size.invalid":
      return new AppError("bad_request", (err as Error).message);
    default:
      return undefined;
  }
}
