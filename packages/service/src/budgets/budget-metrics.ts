import { SPEND_WINDOWS, TOKEN_WINDOWS } from "@gw/core/limits";
import type { Metrics } from "@gw/core/metrics";
import { NANO_USD_PER_USD, type Counter as WindowCounter } from "@gw/core/windows";
import { Counter } from "prom-client";

/** Tokens and spend admitted, refused and reconciled, by unit (tokens, spend in USD), window and scope (key, endUser). No ids in labels. */
export function createBudgetMetrics(metrics: Metrics) {
  const registers = [metrics.registry];
  const labelNames = ["unit", "window", "scope"] as const;
  const reserved = new Counter({
    name: `${metrics.prefix}_budget_reserved_total`,
    help: "Tokens, or US dollars of spend, reserved by admitted model calls, by unit, window and scope (key or endUser).",
    labelNames,
    registers,
  });
  const refusals = new Counter({
    name: `${metrics.prefix}_budget_refusals_total`,
    help: "Model calls refused (429) before the provider, by the unit, window and scope of the window that refused them.",
    labelNames,
    registers,
  });
  const reconciled = new Counter({
    name: `${metrics.prefix}_budget_reconciled_total`,
    help: "Tokens, or US dollars, by which reconciliation with the provider's usage changed reservations, by unit, window, scope and direction: returned (reserved but not used) or overrun (reported beyond the reservation: never charged, a call is charged at most what it reserved).",
    labelNames: [...labelNames, "direction"] as const,
    registers,
  });
  for (const scope of ["key", "endUser"]) {
    for (const [unit, windows] of [
      ["tokens", TOKEN_WINDOWS],
      ["spend", SPEND_WINDOWS],
    ] as const) {
      for (const window of windows) {
        reserved.inc({ unit, window, scope }, 0);
        refusals.inc({ unit, window, scope }, 0);
        for (const direction of ["returned", "overrun"])
          reconciled.inc({ unit, window, scope, direction }, 0);
      }
    }
  }
  const amount = (c: WindowCounter, n: number) => (c.unit === "spend" ? n / NANO_USD_PER_USD : n);
  const labels = (c: WindowCounter) => ({ unit: c.unit, window: c.window, scope: c.scope });
  return {
    reserved(counters: WindowCounter[]) {
      for (const c of counters) if (c.unit !== "requests") reserved.inc(labels(c), amount(c, c.amount));
    },
    refused(c: Pick<WindowCounter, "unit" | "window" | "scope">) {
      refusals.inc({ unit: c.unit, window: c.window, scope: c.scope });
    },
    /** `delta`: charged less reserved, in counted units (never above 0: a call is charged at most its reservation). */
    reconciled(c: WindowCounter, delta: number) {
      if (c.unit === "requests" || delta >= 0) return;
      reconciled.inc({ ...labels(c), direction: "returned" }, amount(c, -delta));
    },
    /** What the provider reported beyond the reservation, in counted units: not charged. */
    overrun(c: WindowCounter, beyond: number) {
      if (c.unit === "requests" || beyond <= 0) return;
      reconciled.inc({ ...labels(c), direction: "overrun" }, amount(c, beyond));
    },
  };
}

export type BudgetMetrics = ReturnType<typeof createBudgetMetrics>;
