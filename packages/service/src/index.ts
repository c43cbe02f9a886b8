export { createServiceApp } from "./app.ts";
export { type ServiceConfig, serviceConfigSchema } from "./config.ts";
export { createEvalMetrics } from "./evals/metrics.ts";
export { createProviderMetrics } from "./llm/provider-metrics.ts";
export { SERVICE_OPERATIONS } from "./routes/operations.ts";
export { type RunningService, startService } from "./server.ts";
