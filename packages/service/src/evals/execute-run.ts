import type { Logger } from "@gw/core";
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

/** Why the model could not answer: the run's `error`, which the caller reads. */
class ModelFailure extends Error {}

/** Runs a call to the model provider; its failures (and only those) are reported to the caller as they are. */
async function ask<T>(call: () => T | Promise<T>): Promise<T> {
  try {
    return await call();
  } catch (err) {
    throw new ModelFailure(err instanceof Error ? err.message : String(err));
  }
}

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
    const model = await ask(() => {
      deps.provider.assertConfigured();
      const resolved = deps.provider.resolveModel(schedule.model);
      if (!resolved) throw new Error(`The model '${schedule.model}' is not one of LLM_MODELS`);
      return resolved;
    });
    await deps.store.update(org, runId, { model });
    for (const item of schedule.inputs) {
      const { input, expected } = typeof item === "string" ? { input: item, expected: null } : item;
      const completion = await ask(() =>
        deps.provider.complete(model, [{ role: "user", content: input }], undefined, signal),
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
    if (signal.aborted) error = "The worker stopped before the run finished";
    else if (err instanceof ModelFailure) error = err.message;
    else {
      deps.logger.error({ err, runId }, "eval run failed");
      error = "The run failed on an internal error";
    }
  }
  const status = error === null ? "completed" : "failed";
  await deps.store.update(org, runId, { results, end: { status, at: unixSeconds(), error } });
  return status;
}
