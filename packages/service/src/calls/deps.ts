import { type AuditLog, auditActor } from "@gw/core/audit";
import type { Clock } from "@gw/core/clock";
import { evaluate, holdbackFor, type Policy } from "@gw/core/guardrails";
import type { Logger } from "@gw/core/logger";
import type { Metrics } from "@gw/core/metrics";
import type { RedisClient } from "@gw/core/redis";
import { CountingWindows } from "@gw/core/windows";
import type { BudgetDeps } from "../budgets/admit-model-call.ts";
import { createBudgetMetrics } from "../budgets/budget-metrics.ts";
import type { ServiceConfig } from "../config.ts";
import type { Ids } from "../ids.ts";
import { ADAPTERS } from "../llm/adapters.ts";
import { RedisCooldowns } from "../llm/cooldowns.ts";
import type { ChatProvider } from "../llm/provider.ts";
import type { OrganizationProviderKeys } from "../llm/provider-keys.ts";
import { createProviderMetrics } from "../llm/provider-metrics.ts";
import { ModelRouter } from "../llm/router.ts";
import type { UsageStore } from "../usage/store.ts";
import { type GuardrailDeps, type GuardrailEvaluator, ModelGuardrails } from "./guardrails.ts";

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
 * The guardrails model calls run: `source` gives those attached to a call
 * (the guardrails' resolution, `resolveGuardrails`), the checks library
 * (`@gw/core/guardrails`) evaluates them, each decision is counted in
 * `metrics` and audited in `audit` (`guardrail.decision`). A
 * `prompt_injection` check's `judge_model` is called through `provider` (the
 * router model calls use), its tokens recorded in `usage`; without them such
 * a judge gives no verdict. Tests may give their own `evaluate` and `audit`.
 */
export function modelGuardrailsOf(
  config: Pick<ServiceConfig, "GUARDRAIL_STREAM_HOLDBACK_CHARS" | "GUARDRAIL_JUDGE_TIMEOUT_MS">,
  deps: { metrics: Metrics; logger: Logger; audit: AuditLog; provider?: ChatProvider; usage?: UsageStore },
  parts: Pick<GuardrailDeps, "source"> & Partial<Pick<GuardrailDeps, "evaluate" | "audit">>,
): ModelGuardrails {
  const { audit } = deps;
  return new ModelGuardrails({
    // The window the checks library's policies need; another evaluator (a test's) has only the setting's.
    ...(parts.evaluate ? {} : { holdbackFor: (policies) => holdbackFor(policies as unknown as Policy[]) }),
    evaluate: evaluateChecks,
    audit: async ({ principal, requestId, guardrail, check, action, direction }) => {
      await audit.record(
        {
          organization: principal.org,
          actor: auditActor(principal),
          action: "guardrail.decision",
          resourceType: "guardrail",
          resourceId: guardrail,
          check,
          guardrailAction: action,
          direction,
          requestId,
        },
        "allowed",
      );
    },
    ...(deps.provider && deps.usage
      ? {
          judge: {
            provider: deps.provider,
            usage: deps.usage,
            timeoutMs: config.GUARDRAIL_JUDGE_TIMEOUT_MS,
          },
        }
      : {}),
    ...parts,
    metrics: deps.metrics,
    logger: deps.logger,
    holdbackChars: config.GUARDRAIL_STREAM_HOLDBACK_CHARS,
  });
}

/** The checks library's `evaluate` in the pipeline's terms: a decision names its guardrail, check and action. */
const evaluateChecks: GuardrailEvaluator = (policies, text, context) => {
  // The policies come from the guardrails' store, validated by the checks' schemas when they were written.
  const { decisions, redacted } = evaluate(policies as unknown as Policy[], text, context);
  return {
    decisions: decisions.map((d) => ({ guardrail: d.policyId, check: d.check, action: d.action })),
    redacted,
  };
};

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
