import { timingSafeEqual } from "node:crypto";
import express, { type RequestHandler } from "express";
import { z } from "zod";
import { unauthorized } from "../errors.ts";
import type { Logger } from "../logger.ts";
import type { Metrics } from "../metrics.ts";
import { errorHandler, notFoundHandler } from "./common.ts";
import { closeGracefully, listen } from "./listen.ts";

/** Where `/metrics` is served; spread into each process's schema. */
export const metricsEnvShape = {
  /** Port of a listener serving only `/metrics` (on HOST). Unset: `/metrics` on the process's own port. */
  METRICS_PORT: z.coerce.number().int().min(0).max(65535).optional(),
  /** When set, `/metrics` needs `Authorization: Bearer <token>` (at least 16 characters). */
  METRICS_TOKEN: z.string().min(16, "must be at least 16 characters").optional(),
};

/** How a process serves `/metrics`. */
export interface MetricsEndpoint {
  /** Required as a bearer token when set. */
  token?: string | undefined;
  /** Served by its own listener (`METRICS_PORT`), not on the application's port. */
  separatePort?: number | undefined;
}

/** The endpoint the variables of `metricsEnvShape` describe. */
export function metricsEndpointOf(c: {
  METRICS_PORT?: number | undefined;
  METRICS_TOKEN?: string | undefined;
}) {
  return { token: c.METRICS_TOKEN, separatePort: c.METRICS_PORT } satisfies MetricsEndpoint;
}

/** `GET /metrics`: the registry in Prometheus's text format, behind the token if there is one. */
export function metricsHandler(metrics: Metrics, token?: string): RequestHandler {
  const expected = token === undefined ? undefined : Buffer.from(`Bearer ${token}`);
  return async (req, res) => {
    if (expected) {
      const presented = Buffer.from(req.get("authorization") ?? "");
      if (presented.length !== expected.length || !timingSafeEqual(presented, expected))
        throw unauthorized("Metrics need the scraper's bearer token");
    }
    res.type(metrics.registry.contentType).send(await metrics.registry.metrics());
  };
}

/** A listener serving only `/metrics`, when `METRICS_PORT` says so; `undefined` otherwise. */
export async function listenForMetrics(
  endpoint: MetricsEndpoint,
  metrics: Metrics,
  host: string,
  logger: Logger,
): Promise<{ port: number; close(): Promise<void> } | undefined> {
  if (endpoint.separatePort === undefined) return undefined;
  const app = express();
  app.disable("x-powered-by");
  app.get("/metrics", metricsHandler(metrics, endpoint.token));
  app.use(notFoundHandler);
  app.use(errorHandler(logger));
  const { server, port } = await listen(app, endpoint.separatePort, host);
  return { port, close: () => closeGracefully(server, 1_000) };
}
