import { createMetrics } from "@gw/core";
import { Counter } from "prom-client";

/** The gateway's metrics: the shared HTTP ones plus its own decisions. */
export function createGatewayMetrics() {
  const base = createMetrics("gateway");
  const authentications = new Counter({
    name: "gateway_authentications_total",
    help: "Credentials presented, by outcome (ok, missing, malformed, unknown, expired, revoked).",
    labelNames: ["outcome"] as const,
    registers: [base.registry],
  });
  return { ...base, authentications };
}

export type GatewayMetrics = ReturnType<typeof createGatewayMetrics>;
