import { createMetrics } from "@gw/core";
import { Counter, Histogram } from "prom-client";

/** The gateway's metrics: the shared HTTP ones plus its own decisions. */
export function createGatewayMetrics() {
  const base = createMetrics("gateway");
  const authentications = new Counter({
    name: "gateway_authentications_total",
    help: "Credentials presented, by outcome (ok, missing, malformed, unknown, expired, revoked).",
    labelNames: ["outcome"] as const,
    registers: [base.registry],
  });
  const tokenExchanges = new Counter({
    name: "gateway_token_exchanges_total",
    help: "API-key-for-token exchanges, by outcome (issued, forbidden, invalid).",
    labelNames: ["outcome"] as const,
    registers: [base.registry],
  });
  const jwtVerifications = new Counter({
    name: "gateway_jwt_verifications_total",
    help: "Gateway tokens presented as credentials, by outcome (ok, expired, signature, audience, ...).",
    labelNames: ["outcome"] as const,
    registers: [base.registry],
  });
  const rateLimitDecisions = new Counter({
    name: "gateway_rate_limit_decisions_total",
    help: "Rate-limit decisions: allowed (one per window checked) or rejected (by the refusing window), by store.",
    labelNames: ["outcome", "window", "store"] as const,
    registers: [base.registry],
  });
  const rateLimitStoreErrors = new Counter({
    name: "gateway_rate_limit_store_errors_total",
    help: "Rate-limit decisions that failed in Redis.",
    registers: [base.registry],
  });
  const rateLimitFallbacks = new Counter({
    name: "gateway_rate_limit_fallbacks_total",
    help: "Decisions made without Redis: by the in-memory insurance limiter (open) or refused with 503 (closed).",
    labelNames: ["mode"] as const,
    registers: [base.registry],
  });
  const rateLimitDecisionSeconds = new Histogram({
    name: "gateway_rate_limit_decision_seconds",
    help: "Time to decide one request's quotas.",
    buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25],
    registers: [base.registry],
  });
  return {
    ...base,
    authentications,
    tokenExchanges,
    jwtVerifications,
    rateLimitDecisions,
    rateLimitStoreErrors,
    rateLimitFallbacks,
    rateLimitDecisionSeconds,
  };
}

export type GatewayMetrics = ReturnType<typeof createGatewayMetrics>;
