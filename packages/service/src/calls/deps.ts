import type { Clock } from "@gw/core/clock";
import type { Logger } from "@gw/core/logger";
import type { Metrics } from "@gw/core/metrics";
import type { RedisClient } from "@gw/core/redis";
import { CountingWindows } from "@gw/core/windows";
import type { BudgetDeps } from "../budgets/admit-model-call.ts";
import { createBudgetMetrics } from "../budgets/budget-metrics.ts";
import type { ServiceConfig } from "../config.ts";
import type { Ids } from "../ids.ts";
import type { ChatProvider } from "../llm/provider.ts";
import { createProviderMetrics, MeteredProvider } from "../llm/provider-metrics.ts";

// What the model-call pipeline needs from the configuration, for the service and for eval worker processes.

/**
 * The model provider the configuration names (responses and eval runs share
 * it), its calls in `metrics`, the ids of tool calls it sends without one from `ids`.
 */
export function chatProvider(config: ServiceConfig, metrics: Metrics, ids: Ids): ChatProvider {
  return new MeteredProvider(
    {
      baseUrl: config.LLM_BASE_URL,
      apiKey: config.LLM_API_KEY,
      defaultModel: config.LLM_DEFAULT_MODEL,
      allowedModels: config.LLM_MODELS,
      timeoutMs: config.LLM_TIMEOUT_MS,
      maxResponseBytes: config.LLM_MAX_RESPONSE_BYTES,
      maxEventChars: config.LLM_MAX_EVENT_CHARS,
      ids,
      ownedBy: config.LLM_DEVELOPMENT_PROVIDER ? "development" : undefined,
    },
    createProviderMetrics(metrics),
  );
}

/** Token and spend admission of model calls (responses, chat completions, eval runs), its metrics in `metrics`. */
export function budgetDeps(
  config: ServiceConfig,
  redis: RedisClient,
  metrics: Metrics,
  logger: Logger,
  clock: Clock,
): BudgetDeps {
  return {
    windows: new CountingWindows(redis, { clock }),
    prices: config.LLM_MODELS?.prices ?? new Map(),
    defaultMaxOutputTokens: config.LLM_DEFAULT_MAX_OUTPUT_TOKENS,
    metrics: createBudgetMetrics(metrics),
    logger,
  };
}
