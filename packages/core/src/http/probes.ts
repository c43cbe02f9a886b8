import type { Router } from "express";
import type { Metrics } from "../metrics.ts";
import { type MetricsEndpoint, metricsHandler } from "./metrics-endpoint.ts";

/** A named dependency check for `/readyz`; resolves true when the dependency answers. */
export type ReadinessCheck = () => Promise<boolean>;

/**
 * `/healthz` (the process is alive), `/readyz` (its dependencies answer),
 * `/metrics` (Prometheus; here unless it has a port of its own).
 */
export function registerProbes(
  router: Router,
  checks: Record<string, ReadinessCheck>,
  metrics: Metrics,
  endpoint: MetricsEndpoint = {},
): void {
  router.get("/healthz", (_req, res) => {
    res.json({ status: "ok" });
  });
  router.get("/readyz", async (_req, res) => {
    const names = Object.keys(checks);
    const results = await Promise.all(names.map((name) => checks[name]!().catch(() => false)));
    const report = Object.fromEntries(names.map((name, i) => [name, results[i] ? "ok" : "unreachable"]));
    const ready = results.every(Boolean);
    res.status(ready ? 200 : 503).json({ status: ready ? "ready" : "not ready", checks: report });
  });
  if (endpoint.separatePort === undefined) router.get("/metrics", metricsHandler(metrics, endpoint.token));
}
