import {
  type Logger,
  type Principal,
  principalOf,
  type ResourceAuthorization,
  requirePermission,
  validate,
} from "@gw/core";
import type { Router } from "express";
import { admitModelCall, type BudgetDeps } from "../../budgets/admit-model-call.ts";
import { completionObject, storedMessages } from "../../completions/completion.ts";
import {
  type CreateCompletionInput,
  chatRequestOf,
  createCompletionBody,
} from "../../completions/request.ts";
import type { ChatCompletionObject, CompletionStore } from "../../completions/store.ts";
import { newCompletionId } from "../../ids.ts";
import { requireUsableModel, resolveModel } from "../../llm/models.ts";
import type { ChatProvider, Completion } from "../../llm/provider.ts";
import { withoutNulls } from "../../schema.ts";
import type { UsageStore } from "../../usage/store.ts";
import { recordUsage, releaseOwnership, settlePartial, usedBy } from "../model-calls.ts";
import { deprecated } from "./deprecation.ts";
import { type StreamedCompletion, streamCompletion } from "./stream-completion.ts";

export interface CreateCompletionDeps {
  logger: Logger;
  provider: ChatProvider;
  authorization: ResourceAuthorization;
  completions: CompletionStore;
  usage: UsageStore;
  budgets: BudgetDeps;
}

/**
 * `POST /api/v1/llm/chat/completions` (deprecated: see `deprecated`): one
 * call of the model in OpenAI's Chat Completions shape, as JSON or as a
 * stream of chunks, with the admission, model allowlist and usage of
 * responses. With `store: true` the principal owns the new `chatcmpl-…` id
 * as a `completion` resource and the completion is kept with its messages.
 */
export function registerCreateCompletion(router: Router, deps: CreateCompletionDeps): void {
  router.post("/llm/chat/completions", deprecated, requirePermission("responses:write"), async (req, res) => {
    const input = validate("body", createCompletionBody, withoutNulls(req.body));
    const principal = principalOf(res);
    deps.provider.assertConfigured();
    const model = resolveModel(deps.provider, input.model);
    requireUsableModel(principal, model);
    const request = chatRequestOf(input, model);
    // Budgets are reserved before anything is created or sent; every way out below settles them once.
    const admitted = await admitModelCall(deps.budgets, res, request);
    request.maxOutputTokens = admitted.maxOutputTokens;
    const id = newCompletionId();
    const created = Math.floor(Date.now() / 1000);
    const abort = new AbortController();
    res.on("close", () => {
      if (!res.writableFinished) abort.abort(new Error("client disconnected"));
    });

    try {
      if (input.store) await deps.authorization.createOwnership(principal, { type: "completion", id });
    } catch (err) {
      await admitted.release();
      throw err;
    }
    if (!input.stream) {
      let completion: Completion;
      try {
        completion = await deps.provider.complete(request, abort.signal);
      } catch (err) {
        await Promise.all([admitted.release(), release(deps, principal, input, id)]);
        throw err;
      }
      await admitted.settle(usedBy(completion));
      const answer = completionObject(id, created, completion, input.metadata ?? {});
      try {
        await finish(deps, principal, input, answer, completion, model);
      } catch (err) {
        // Not stored (PostgreSQL away…): its id must not keep an owner relationship that nothing will ever sweep.
        await release(deps, principal, input, id);
        throw err;
      }
      res.json(answer);
      return;
    }

    let stream: StreamedCompletion;
    try {
      stream = await streamCompletion(res, {
        ...deps,
        request,
        id,
        created,
        includeUsage: input.stream_options?.include_usage === true,
        signal: abort.signal,
      });
    } catch (err) {
      // failed before the first byte: an ordinary error answer
      await Promise.all([admitted.release(), release(deps, principal, input, id)]);
      throw err;
    }
    if (stream.completion) {
      await admitted.settle(usedBy(stream.completion));
      try {
        // Stored before the client hears the end.
        await finish(
          deps,
          principal,
          input,
          completionObject(id, created, stream.completion, input.metadata ?? {}),
          stream.completion,
          model,
        );
      } catch (err) {
        stream.fail(err);
        await release(deps, principal, input, id);
        return;
      }
      stream.end(stream.completion);
      return;
    }
    // The stream broke after it began: what the model produced still counts, nothing was kept.
    await settlePartial(deps.usage, admitted, principal, request, stream.partial);
    await release(deps, principal, input, id);
  });
}

/** Gives up the id of a completion that was never stored (best effort). */
function release(
  deps: CreateCompletionDeps,
  principal: Principal,
  input: CreateCompletionInput,
  id: string,
): Promise<void> {
  return input.store
    ? releaseOwnership(deps.authorization, principal, { type: "completion", id })
    : Promise.resolve();
}

/** Stores the completion (with `store: true`) and records its usage. */
async function finish(
  deps: CreateCompletionDeps,
  principal: Principal,
  input: CreateCompletionInput,
  answer: ChatCompletionObject,
  completion: Completion,
  requestedModel: string,
): Promise<void> {
  await Promise.all([
    input.store
      ? deps.completions.save(principal.org, answer, storedMessages(answer.id, input.messages))
      : undefined,
    recordUsage(
      deps.usage,
      principal,
      answer.model,
      {
        input_tokens: answer.usage.prompt_tokens,
        output_tokens: answer.usage.completion_tokens,
        total_tokens: answer.usage.total_tokens,
      },
      { cachedTokens: completion.usageDetails.cachedTokens, pricedAs: requestedModel },
    ),
  ]);
}
