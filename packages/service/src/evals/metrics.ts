import type { Metrics } from "@gw/core/metrics";
import { Counter, Gauge, Histogram } from "prom-client";

/** Eval metrics in the process's registry. No schedule, run or organization ids in labels. */
export function createEvalMetrics(
  metrics: Metrics,
  depth?: () => Promise<{ waiting: number; active: number; delayed: number }>,
) {
  const registers = [metrics.registry];
  const runs = new Counter({
    name: `${metrics.prefix}_eval_runs_total`,
    help: "Eval runs by outcome: completed, failed, dropped (its schedule was deleted before it started) or skipped (the schedule fired while its previous run was still queued).",
    labelNames: ["outcome"] as const,
    registers,
  });
  const duration = new Histogram({
    name: `${metrics.prefix}_eval_run_duration_seconds`,
    help: "Time from a run's start to its end, by outcome (completed or failed).",
    labelNames: ["outcome"] as const,
    buckets: [0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800],
    registers,
  });
  for (const outcome of ["completed", "failed", "dropped", "skipped"]) runs.inc({ outcome }, 0);
  for (const outcome of ["completed", "failed"]) duration.zero({ outcome });
  new Gauge({
    name: `${metrics.prefix}_eval_queue_jobs`,
    help: "Jobs in the eval queue by state: waiting, active, delayed (each schedule's next firing is one delayed job).",
    labelNames: ["state"] as const,
    registers,
    async collect() {
      if (!depth) return;
      try {
        for (const [state, count] of Object.entries(await depth())) this.set({ state }, count);
      } catch {
        this.reset(); // Redis unreachable: no figure rather than a stale one
      }
    },
  });
  return { runs, duration };
}

export type EvalMetrics = ReturnType<typeof createEvalMetrics>;
