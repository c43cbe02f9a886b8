import type { Logger } from "@gw/core/logger";
import { ProviderError } from "../llm/errors.ts";
import type { ChatProvider } from "../llm/provider.ts";
import type { UsageStore } from "../usage/store.ts";
import { type EvalResult, type EvalSchedule, unixSeconds } from "./records.ts";
import type { EvalStore } from "./store.ts";

export interface ExecuteRunDeps {
  store: EvalStore;
  provider: ChatProvider;
  usage: UsageStore;
  logger: Logger;
}

/** A failure in the service's own words, which the run's `error` may show. */
class RunFailure extends Error {}

/**
 * Sends every input of the schedule through the model provider, one after
 * another, recording each answer as it comes and its tokens in usage (under
 * the schedule's creator and key). The first failure ends the run as
 * `failed`, keeping the results so far. Resolves with how the run ended.
 */
export async function executeRun(
  deps: ExecuteRunDeps,
  schedule: EvalSchedule,
  org: string,
  runId: string,
  signal: AbortSignal,
): Promise<"completed" | "failed"> {
  const results: EvalResult[] = [];
  let error: string | null = null;
  try {
    deps.provider.assertConfigured();
    const model = deps.provider.resolveModel(schedule.model);
    if (!model) throw new RunFailure(`The model '${schedule.model}' is not one of LLM_MODELS`);
    await deps.store.update(org, runId, { model });
    for (const item of schedule.inputs) {
      const { input, expected } = typeof item === "string" ? { input: item, expected: null } : item;
      const completion = await deps.provider.complete(
        { model, messages: [{ role: "user", content: input }] },
        signal,
      );
      results.push({
        input,
        expected,
        output: completion.text,
        passed: expected === null ? null : completion.text.includes(expected),
        usage: completion.usage,
      });
      await Promise.all([
        deps.usage.record({
          org,
          keyId: schedule.creator.keyId,
          user: schedule.creator.user,
          model: completion.model,
          usage: completion.usage,
        }),
        deps.store.update(org, runId, { results }),
      ]);
    }
  } catch (err) {
    // Provider errors speak in the service's words; what the provider said goes to the log only.
    if (signal.aborted) error = "The worker stopped before the run finished";
    else if (err instanceof ProviderError || err instanceof RunFailure) error = err.message;
    else error = "The run failed on an internal error";
    if (err instanceof ProviderError) deps.logger.warn({ err, runId }, "eval run failed: model provider");
    else if (!(err instanceof RunFailure)) deps.logger.error({ err, runId }, "eval run failed");
  }
  const status = error === null ? "completed" : "failed";
  await deps.store.update(org, runId, { results, end: { status, at: unixSeconds(), error } });
  return status;
}
