import {
  errorHandler,
  type Logger,
  type Metrics,
  notFoundHandler,
  redisReady,
  registerProbes,
  useRequestBasics,
} from "@gw/core";
import express, { Router } from "express";
import type { Redis } from "ioredis";

export interface ServiceDeps {
  logger: Logger;
  metrics: Metrics;
  redis: Redis;
}

/** The service behind the gateway. Its API routes arrive with the forwarding issue; today it serves its probes. */
export function createServiceApp(deps: ServiceDeps): express.Express {
  const app = express();
  useRequestBasics(app, deps.logger, deps.metrics);
  const probes = Router();
  registerProbes(probes, { redis: () => redisReady(deps.redis) }, deps.metrics);
  app.use(probes);
  app.use(notFoundHandler);
  app.use(errorHandler(deps.logger));
  return app;
}
