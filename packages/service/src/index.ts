export { createServiceApp } from "./app.ts";
export { createBudgetMetrics } from "./budgets/budget-metrics.ts";
export { refuseDevelopmentSettings, type ServiceConfig, serviceConfigSchema } from "./config.ts";
export { createEvalMetrics } from "./evals/metrics.ts";
export { FIELDS_NOT_TAKEN } from "./llm/fields.ts";
export { createProviderMetrics } from "./llm/provider-metrics.ts";
export { countPromptTokens, countTokens, tokenizerOf } from "./llm/tokens.ts";
export { SERVICE_OPERATIONS, serviceRoutes } from "./routes.ts";
export { type RunningService, startService } from "./server.ts";
