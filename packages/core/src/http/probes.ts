import type { Router } from "express";
import type { Metrics } from "../metrics.ts";

/** A named dependency check for `/readyz`; resolves true when the dependency answers. */
export type ReadinessCheck = () => Promise<boolean>;

/** `/healthz` (the process is alive), `/readyz` (its dependencies answer), `/metrics` (Prometheus). */
export function registerProbes(
  router: Router,
  checks: Record<string, ReadinessCheck>,
  metrics: Metrics,
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
  router.get("/metrics", async (_req, res) => {
    res.type(metrics.registry.contentType).send(await metrics.registry.metrics());
  });
}
