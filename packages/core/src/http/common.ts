import { randomUUID } from "node:crypto";
import express, { type ErrorRequestHandler, type RequestHandler } from "express";
import { LastOwner, NotResourceOwner } from "../authz/resource-authorization.ts";
import { SpiceDBUnavailable } from "../authz/spicedb-client.ts";
import { AppError, ERROR_CATALOGUE, ValidationFailed } from "../errors.ts";
import type { Logger } from "../logger.ts";
import type { Metrics } from "../metrics.ts";

/** Largest JSON body accepted; larger ones get 413. */
export const BODY_LIMIT_BYTES = 1024 * 1024;

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

declare global {
  namespace Express {
    interface Request {
      id: string;
    }
    interface Locals {
      /** Route label for logs and metrics when no Express route matched (e.g. forwarded areas). */
      routeLabel?: string;
    }
  }
}

/** The route template a request matched, for logs and metric labels (never the raw path: ids would explode cardinality). */
function routeOf(req: express.Request): string {
  const path = req.route?.path;
  if (typeof path === "string") return `${req.baseUrl}${path}`;
  return req.res?.locals.routeLabel ?? "unmatched";
}

/**
 * What every process puts in front of its routes: a request id (kept from a
 * well-formed incoming `X-Request-Id`, else new) echoed on every response,
 * and an access log line and HTTP metrics when the response finishes.
 */
export function useRequestBasics(app: express.Express, logger: Logger, metrics: Metrics): void {
  app.disable("x-powered-by");
  app.use((req, res, next) => {
    const incoming = req.get("x-request-id");
    req.id = incoming && REQUEST_ID.test(incoming) ? incoming : randomUUID();
    res.setHeader("X-Request-Id", req.id);
    const started = process.hrtime.bigint();
    res.on("finish", () => {
      const seconds = Number(process.hrtime.bigint() - started) / 1e9;
      const route = routeOf(req);
      metrics.httpRequests.inc({ method: req.method, route, status: String(res.statusCode) });
      metrics.httpDuration.observe({ method: req.method, route }, seconds);
      const principal = res.locals.principal as { org?: string; keyId?: string } | undefined;
      logger.info(
        {
          requestId: req.id,
          method: req.method,
          route,
          status: res.statusCode,
          durationMs: Math.round(seconds * 1e6) / 1e3,
          org: principal?.org,
          keyId: principal?.keyId,
        },
        "request",
      );
    });
    next();
  });
}

/**
 * JSON bodies up to 1 MiB, for routes that read them. Not applied globally:
 * the gateway streams forwarded bodies to the service untouched.
 */
export const jsonBody = express.json({ limit: BODY_LIMIT_BYTES });

/** 404 in JSON for any route nobody served. */
export const notFoundHandler: RequestHandler = (req, _res, next) => {
  next(new AppError("not_found", `No route for ${req.method} ${req.path}`));
};

/** The one error middleware: catalogue errors become their bodies, anything else a 500 with only the request id. */
export function errorHandler(logger: Logger): ErrorRequestHandler {
  return (err, req, res, _next) => {
    const appError = fromBodyParser(err) ?? fromDomain(err) ?? err;
    if (res.headersSent) {
      logger.error({ requestId: req.id, err }, "error after the response started");
      res.destroy();
      return;
    }
    if (appError instanceof ValidationFailed) {
      res.status(422).json({ detail: appError.issues });
      return;
    }
    if (appError instanceof AppError) {
      if (appError.status >= 500) logger.warn({ requestId: req.id, err: appError }, appError.message);
      res.set(appError.headers);
      if (appError.code === "rate_limited") {
        res.status(429).json({ error: "Rate limit exceeded" });
        return;
      }
      res
        .status(appError.status)
        .json({ error: ERROR_CATALOGUE[appError.code].title, message: appError.message });
      return;
    }
    logger.error({ requestId: req.id, err }, "unhandled error");
    res.status(500).json({ error: "Internal Server Error", requestId: req.id });
  };
}

/** Domain errors carry no status; this is where they get one. */
function fromDomain(err: unknown): AppError | undefined {
  if (err instanceof NotResourceOwner) return new AppError("forbidden", err.message);
  if (err instanceof LastOwner) return new AppError("conflict", err.message);
  if (err instanceof SpiceDBUnavailable) {
    return new AppError("service_unavailable", "The authorization backend is unavailable; try again", {
      cause: err,
    });
  }
  return undefined;
}

/** body-parser signals its failures with a `type`; they are the client's fault, not ours. */
function fromBodyParser(err: unknown): AppError | undefined {
  const type = (err as { type?: string } | null)?.type;
  switch (type) {
    case "entity.parse.failed":
      return new ValidationFailed([
        {
          loc: ["body"],
          msg: "JSON decode error",
          type: "json_invalid",
          ctx: { error: (err as Error).message },
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
