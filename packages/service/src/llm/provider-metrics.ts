import { LATENCY_BUCKETS, type Metrics } from "@gw/core/metrics";
import { Counter, Gauge, Histogram } from "prom-client";
import type { Catalogue, Deployment } from "./catalogue.ts";
import type { Completion } from "./chat.ts";
import type { Cooldowns, DeploymentState } from "./cooldowns.ts";
import { costNanoUsd } from "./prices.ts";
import type { CallOutcome, RouterMetrics } from "./router.ts";
import { ATTEMPT_OUTCOMES } from "./router.ts";

/** How a call to the model provider ended: `cancelled` when our caller went away first. */
export const PROVIDER_OUTCOMES = ["ok", "error", "rate_limited", "timeout", "cancelled"] as const;

/** A deployment's labels: the catalogue name it serves, its id, its provider kind. Never a user, key or organization. */
const DEPLOYMENT_LABELS = ["model", "deployment", "provider"] as const;
const labelsOf = (d: Deployment) => ({ model: d.modelName, deployment: d.id, provider: d.provider });

/**
 * Model calls in the process's registry: each routed call as a whole (by
 * outcome), and each deployment's attempts, retries, fallbacks, cooldowns,
 * latency, tokens and cost, labelled by catalogue name, deployment id and
 * provider kind (a catalogue is bounded; the shorthand without `LLM_MODELS`
 * labels every name `*`).
 */
export function createProviderMetrics(metrics: Metrics) {
  const registers = [metrics.registry];
  const p = metrics.prefix;
  const requests = new Counter({
    name: `${p}_llm_requests_total`,
    help: "Model calls (a JSON answer or a whole stream, across every attempt of its deployments and fallbacks), by outcome: ok, error (an error answer, a broken or oversized answer, no connection, no deployment left), rate_limited (a provider's 429), timeout, cancelled (our caller went away).",
    labelNames: ["outcome"] as const,
    registers,
  });
  const duration = new Histogram({
    name: `${p}_llm_request_duration_seconds`,
    help: "Time from routing a model call to its whole answer (a stream's end), every attempt included, by outcome.",
    labelNames: ["outcome"] as const,
    buckets: [...LATENCY_BUCKETS, 30, 60, 120],
    registers,
  });
  const tokens = new Counter({
    name: `${p}_llm_tokens_total`,
    help: "Tokens of completed model calls, as the provider counted them (else estimated), by kind: input or output.",
    labelNames: ["kind"] as const,
    registers,
  });
  const overruns = new Counter({
    name: `${p}_llm_output_overruns_total`,
    help: "Model calls whose provider went past the output cap it was sent (it ignored max_tokens): the answer was cut at the cap and charged at most what was reserved.",
    registers,
  });
  const overrunTokens = new Counter({
    name: `${p}_llm_output_overrun_tokens_total`,
    help: "Output tokens providers produced past the cap they were sent, as far as they were read before the cut (a JSON answer: as the provider reported them); never charged.",
    registers,
  });
  const served = new Counter({
    name: `${p}_llm_deployment_requests_total`,
    help: "Model calls a deployment answered (whole), by catalogue model, deployment and provider.",
    labelNames: DEPLOYMENT_LABELS,
    registers,
  });
  const attempts = new Counter({
    name: `${p}_llm_attempts_total`,
    help: "Attempts of model calls on a deployment, by outcome: ok, or the class of its error: timeout, connection (refused, reset, unreachable), rate_limited (429), server_error (5xx), conflict (408, 409), client_error (another 4xx: the caller's fault, not retried), broken (an answer that could not be used, or a stream that broke), cancelled (our caller went away).",
    labelNames: [...DEPLOYMENT_LABELS, "outcome"] as const,
    registers,
  });
  const attemptDuration = new Histogram({
    name: `${p}_llm_attempt_duration_seconds`,
    help: "Time of one attempt on a deployment, from sending it to its answer's end (a failure: to the failure), by result: ok or failed.",
    labelNames: [...DEPLOYMENT_LABELS, "result"] as const,
    buckets: [...LATENCY_BUCKETS, 30, 60, 120],
    registers,
  });
  const retries = new Counter({
    name: `${p}_llm_retries_total`,
    help: "Attempts after a call's first (a retry), by the deployment they went to.",
    labelNames: DEPLOYMENT_LABELS,
    registers,
  });
  const fallbacks = new Counter({
    name: `${p}_llm_fallbacks_total`,
    help: "Model calls that came to a fallback (their first attempt on it), by the model asked for and the fallback.",
    labelNames: ["model", "fallback"] as const,
    registers,
  });
  const cooldowns = new Counter({
    name: `${p}_llm_cooldowns_total`,
    help: "Cooldowns this process started for a deployment (its failures reached the catalogue's count within its window, a provider's Retry-After, or a failed probe); each cooldown is counted by the one replica that started it.",
    labelNames: DEPLOYMENT_LABELS,
    registers,
  });
  const deploymentTokens = new Counter({
    name: `${p}_llm_deployment_tokens_total`,
    help: "Tokens of model calls a deployment answered, as the provider counted them, by kind: input (cached input included), cached_input, output.",
    labelNames: [...DEPLOYMENT_LABELS, "kind"] as const,
    registers,
  });
  const cost = new Counter({
    name: `${p}_llm_deployment_cost_usd_total`,
    help: "What model calls a deployment answered cost at its price in the catalogue, in US dollars (unpriced deployments: 0).",
    labelNames: DEPLOYMENT_LABELS,
    registers,
  });
  const storeErrors = new Counter({
    name: `${p}_llm_cooldown_store_errors_total`,
    help: "Reads and writes of the shared cooldown state in Redis that failed; routing then goes on as if every deployment were ready.",
    registers,
  });
  let watched: { catalogue: Catalogue; cooldowns: Cooldowns } | undefined;
  new Gauge({
    name: `${p}_llm_deployment_cooling`,
    help: "1 while a deployment cools down, as the shared state in Redis says at the scrape (every replica reports the same); 0 otherwise, and always for a model that never cools (one deployment, no fallback).",
    labelNames: DEPLOYMENT_LABELS,
    registers,
    async collect() {
      if (!watched) return;
      this.reset();
      const { catalogue, cooldowns: store } = watched;
      for (const name of catalogue.names) {
        const model = catalogue.get(name);
        if (!model) continue;
        let states: DeploymentState[] = [];
        try {
          if (model.canCool) states = await store.states(model);
        } catch {
          storeErrors.inc();
        }
        for (const d of model.deployments) this.set(labelsOf(d), states[d.index]?.kind === "cooling" ? 1 : 0);
      }
      // The shorthand without LLM_MODELS: its one deployment, which never cools.
      for (const d of catalogue.deployments) if (d.modelName === "*") this.set(labelsOf(d), 0);
    },
  });
  for (const outcome of PROVIDER_OUTCOMES) requests.inc({ outcome }, 0);
  for (const kind of ["input", "output"]) tokens.inc({ kind }, 0);

  const router: RouterMetrics = {
    attempt(deployment, outcome, seconds, retry) {
      const labels = labelsOf(deployment);
      attempts.inc({ ...labels, outcome });
      attemptDuration.observe({ ...labels, result: outcome === "ok" ? "ok" : "failed" }, seconds);
      if (retry) retries.inc(labels);
    },
    served(deployment, completion) {
      const labels = labelsOf(deployment);
      served.inc(labels);
      const { usage, usageDetails } = completion;
      deploymentTokens.inc({ ...labels, kind: "input" }, usage.input_tokens);
      deploymentTokens.inc({ ...labels, kind: "cached_input" }, usageDetails.cachedTokens);
      deploymentTokens.inc({ ...labels, kind: "output" }, usage.output_tokens);
      if (deployment.price)
        cost.inc(
          labels,
          costNanoUsd(deployment.price, { ...usage, cached_tokens: usageDetails.cachedTokens }) / 1e9,
        );
    },
    fallback(model, fallback) {
      fallbacks.inc({ model, fallback });
    },
    cooldownStarted(deployment) {
      cooldowns.inc(labelsOf(deployment));
    },
    cooldownStoreFailed() {
      storeErrors.inc();
    },
    call(outcome: CallOutcome, seconds: number, completion?: Pick<Completion, "usage" | "overrun">) {
      requests.inc({ outcome });
      duration.observe({ outcome }, seconds);
      if (completion) {
        tokens.inc({ kind: "input" }, completion.usage.input_tokens);
        tokens.inc({ kind: "output" }, completion.usage.output_tokens);
      }
      if (completion?.overrun) {
        overruns.inc();
        overrunTokens.inc(completion.overrun);
      }
    },
  };

  return {
    router,
    /**
     * Lists `catalogue`'s deployments from the start (their counters at 0),
     * and reports their cooldowns from `store` at each scrape.
     */
    watch(catalogue: Catalogue, store: Cooldowns) {
      watched = { catalogue, cooldowns: store };
      for (const d of catalogue.deployments) {
        const labels = labelsOf(d);
        served.inc(labels, 0);
        for (const outcome of ATTEMPT_OUTCOMES) attempts.inc({ ...labels, outcome }, 0);
        retries.inc(labels, 0);
        cooldowns.inc(labels, 0);
        cost.inc(labels, 0);
        for (const kind of ["input", "cached_input", "output"]) deploymentTokens.inc({ ...labels, kind }, 0);
      }
      for (const name of catalogue.names)
        for (const fallback of catalogue.get(name)?.fallbacks ?? [])
          fallbacks.inc({ model: name, fallback }, 0);
    },
  };
}

export type ProviderMetrics = ReturnType<typeof createProviderMetrics>;

export { ATTEMPT_OUTCOMES };
