import { Counter, collectDefaultMetrics, Histogram, Registry } from "prom-client";

/**
 * One registry per process, with Node's default metrics and the HTTP
 * metrics every process shares. Labels never carry key ids or user ids:
 * they would explode cardinality and leak identities into dashboards.
 */
export function createMetrics(prefix: string) {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry, prefix: `${prefix}_` });
  const httpRequests = new Counter({
    name: `${prefix}_http_requests_total`,
    help: "HTTP requests answered, by method, route template and status code.",
    labelNames: ["method", "route", "status"] as const,
    registers: [registry],
  });
  const httpDuration = new Histogram({
    name: `${prefix}_http_request_duration_seconds`,
    help: "Time from receiving a request to finishing its response.",
    labelNames: ["method", "route"] as const,
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [registry],
  });
  return { registry, prefix, httpRequests, httpDuration };
}

export type Metrics = ReturnType<typeof createMetrics>;
