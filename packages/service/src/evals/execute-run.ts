import type { Clock } from "@gw/core/clock";
import { AppError } from "@gw/core/errors";
import type { Logger } from "@gw/core/logger";
import { BudgetRefused } from "../budgets/admit-model-call.ts";
import { admitCall, type ModelCallDeps, recordUsage, type StreamedCall } from "../calls/model-call.ts";
import { ProviderError } from "../llm/errors.ts";
import { routeOf } from "../llm/models.ts";
import type { Completion } from "../llm/provider.ts";
import type { CreatorKeys } from "./creator.ts";
import { type EvalResult, type EvalSchedule, unixSeconds } from "./records.ts";
import type { EvalStore } from "./store.ts";

export interface ExecuteRunDeps extends ModelCallDeps {
  store: EvalStore;
  /** The schedule's creator as its key stands now (limits, models, permissions, policy, revoked or not). */
  creators: CreatorKeys;
  logger: Logger;
  /** Stamps runs' times (wall time, as the store expires them). */
  clock: Clock;
}

/** A failure in the service's own words, which the run's `error` may show. */
class RunFailure extends Error {}

/**
 * Sends every input of the schedule through the model provider, one after
 * another, each as one model call of the pipeline every endpoint uses
 * (`calls/model-call.ts`): as the schedule's creator and its key stand now
 * (a revoked, expired or deleted key, one that lost `evals:write` or the
 * permission model calls need, one whose on-behalf-of policy no longer
 * covers the schedule's end user, or a model the key may no longer use,
 * fails the run before any call, saying why), admitted under the key's and the end user's request,
 * token and spend windows with the output cap sent to the provider, settled
 * with what the model used, its usage recorded. Each answer is recorded as
 * it comes. The first failure (a budget's refusal included, before the model
 * is called) ends the run as `failed` saying why, keeping the results so far.
 * Resolves with how the run ended.
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
    if (schedule.model !== "auto" && !deps.provider.resolveModel(schedule.model))
      throw new RunFailure(`The model '${schedule.model}' is not in the model catalogue`);
    const creator = await deps.creators.callerOf(org, schedule.creator);
    if ("refused" in creator) throw new RunFailure(creator.refused);
    // The run's calls serve the run: its id stands for a request's in their log lines and audit records.
    const caller = { ...creator, requestId: runId };
    const { model, route } = routeOf(deps.provider, caller.principal, schedule.model);
    await deps.store.update(org, runId, { model });
    for (const item of schedule.inputs) {
      const { input, expected } = typeof item === "string" ? { input: item, expected: null } : item;
      const call = await admitCall<Completion, StreamedCall>(deps, {
        caller,
        request: { model, route, messages: [{ role: "user", content: input }] },
        owned: undefined,
        keep: async (completion) => {
          await recordUsage(deps.usage, caller.principal, completion.model, completion.usage, {
            cachedTokens: completion.usageDetails.cachedTokens,
            servedBy: completion.servedBy,
          });
          return completion;
        },
      });
      const completion = await call.answer(signal);
      results.push({
        input,
        expected,
        output: completion.text,
        passed: expected === null ? null : completion.text.includes(expected),
        usage: completion.usage,
      });
      await deps.store.update(org, runId, { results });
    }
  } catch (err) {
    // Provider errors speak in the service's words; what the provider said goes to the log only.
    if (signal.aborted) error = "The worker stopped before the run finished";
    else if (err instanceof BudgetRefused)
      error = `Refused by a budget of the schedule's key: ${err.message}`;
    else if (err instanceof ProviderError || err instanceof RunFailure || err instanceof AppError)
      error = err.message;
    else error = "The run failed on an internal error";
    if (err instanceof ProviderError) deps.logger.warn({ err, runId }, "eval run failed: model provider");
    else if (!(err instanceof RunFailure || err instanceof AppError))
      deps.logger.error({ err, runId }, "eval run failed");
  }
  const status = error === null ? "completed" : "failed";
  await deps.store.update(org, runId, {
    results,
    end: { status, at: unixSeconds(deps.clock.wall()), error },
  });
  return status;
}
