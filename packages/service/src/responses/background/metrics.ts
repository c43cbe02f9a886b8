import type { Metrics } from "@gw/core/metrics";
import { Counter, Gauge } from "prom-client";

/** Background responses' metrics in the process's registry. No response, key or organization ids in labels. */
export function createBackgroundMetrics(
  metrics: Metrics,
  depth: () => Promise<Record<string, number | undefined>>,
) {
  const registers = [metrics.registry];
  const finished = new Counter({
    name: `${metrics.prefix}_background_responses_total`,
    help: "Background responses this process's workers ended, by status: completed, incomplete, failed or cancelled.",
    labelNames: ["status"] as const,
    registers,
  });
  for (const status of ["completed", "incomplete", "failed", "cancelled"]) finished.inc({ status }, 0);
  new Gauge({
    name: `${metrics.prefix}_background_queue_jobs`,
    help: "Background responses in the queue by state: waiting (queued) or active (in progress).",
    labelNames: ["state"] as const,
    registers,
    async collect() {
      try {
        for (const [state, count] of Object.entries(await depth())) this.set({ state }, count ?? 0);
      } catch {
        this.reset(); // Redis unreachable: no figure rather than a stale one
      }
    },
  });
  return { finished };
}
