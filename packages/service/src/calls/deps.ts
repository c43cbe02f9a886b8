import type { Clock } from "@gw/core/clock";
import type { Logger } from "@gw/core/logger";
import type { Metrics } from "@gw/core/metrics";
import type { RedisClient } from "@gw/core/redis";
import { CountingWindows } from "@gw/core/windows";
import type { BudgetDeps } from "../budgets/admit-model-call.ts";
import { createBudgetMetrics } from "../budgets/budget-metrics.ts";
import type { ServiceConfig } from "../config.ts";
import type { Ids } from "../ids.ts";
import { type GuardrailDeps, Guardrails } from "./guardrails.ts";
import { ADAPTERS } from "../llm/adapters.ts";
import { RedisCooldowns } from "../llm/cooldowns.ts";
import type { OrganizationProviderKeys } from "../llm/provider-keys.ts";
import { createProviderMetrics } from "../llm/provider-metrics.ts";
import { ModelRouter } from "../llm/router.ts";

// What the model-call pipeline needs from the configuration, for the service and for eval worker processes.

/**
 * The router over the configuration's model catalogue (responses, chat
 * completions and eval runs share it): its calls and deployments in
 * `metrics`, the cooldowns every replica shares in `redis`, the ids of tool
 * calls a provider sends without one from `ids`; `providerKeys` looks up
 * organizations' own keys for `byok` deployments.
 */
export function chatProvider(
  config: ServiceConfig,
  deps: {
    metrics: Metrics;
    ids: Ids;
    redis: RedisClient;
    clock: Clock;
    logger?: Logger;
    providerKeys?: OrganizationProviderKeys;
  },
): ModelRouter {
  const cooldowns = new RedisCooldowns(deps.redis);
  const providerMetrics = createProviderMetrics(deps.metrics);
  providerMetrics.watch(config.catalogue, cooldowns);
  return new ModelRouter({
    catalogue: config.catalogue,
    adapters: ADAPTERS,
    adapterOptions: {
      maxResponseBytes: config.LLM_MAX_RESPONSE_BYTES,
      maxEmbeddingsResponseBytes: config.LLM_MAX_EMBEDDINGS_RESPONSE_BYTES,
      maxEventChars: config.LLM_MAX_EVENT_CHARS,
      ids: deps.ids,
      secrets: config.catalogue.deployments.flatMap((d) => (d.apiKey ? [d.apiKey] : [])),
    },
    cooldowns,
    clock: deps.clock,
    random: Math.random,
    settings: {
      deadlineMs: config.LLM_DEADLINE_MS,
      backoffMs: config.LLM_RETRY_BACKOFF_MS,
      retryAfterMaxMs: config.LLM_RETRY_AFTER_MAX_S * 1000,
    },
    metrics: providerMetrics.router,
    providerKeys: deps.providerKeys,
    logger: deps.logger,
  });
}

/**
 * The guardrails model calls run, with their decisions counted in `metrics`
 * and audited; none without a source of the guardrails attached to calls.
 */
export function guardrailsOf(
  config: Pick<ServiceConfig, "GUARDRAIL_STREAM_HOLDBACK_CHARS">,
  deps: { metrics: Metrics; logger: Logger },
  parts: Pick<GuardrailDeps, "source" | "evaluate"> & Partial<Pick<GuardrailDeps, "audit">> | undefined,
): Guardrails | undefined {
  if (!parts) return undefined;
  const { logger } = deps;
  return new Guardrails({
    ...parts,
    audit:
      parts.audit ??
      (async (record) => {
        const { principal, ...decision } = record;
        logger.info(
          {
            audit: { ...decision, event: "guardrail.decision", org: principal.org, actor: principal.user, keyId: principal.keyId },
          },
          "audit",
        );
      }),
    metrics: deps.metrics,
    logger,
    holdbackChars: config.GUARDRAIL_STREAM_HOLDBACK_CHARS,
  });
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
    prices: config.catalogue,
    defaultMaxOutputTokens: config.LLM_DEFAULT_MAX_OUTPUT_TOKENS,
    metrics: createBudgetMetrics(metrics),
    logger,
  };
}
