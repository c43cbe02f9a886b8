import type { Logger, Principal, ResourceAuthorization, ResourceRef } from "@gw/core";
import { AppError } from "@gw/core";
import type { Response } from "express";
import type { AdmittedCall } from "../budgets/admit-model-call.ts";
import { type ChatRequest, type Completion, type Usage, usageOf } from "../llm/provider.ts";
import type { UsageStore } from "../usage/store.ts";

/** What both model-calling routes (responses, chat completions) do around the call. */

/**
 * Records one model call's tokens for the principal: its organization, key
 * and end user; priced as the model that was asked for (`pricedAs`: the
 * provider may answer with a dated name), cached input at its own price.
 */
export function recordUsage(
  store: UsageStore,
  principal: Principal,
  model: string,
  usage: Usage,
  pricing: { cachedTokens?: number; pricedAs?: string } = {},
): Promise<void> {
  return store.record({
    org: principal.org,
    keyId: principal.keyId,
    user: principal.user,
    model,
    usage,
    ...pricing,
  });
}

/** What a completion used, as budgets settle it. */
export const usedBy = (completion: Completion) => ({
  ...completion.usage,
  cached_tokens: completion.usageDetails.cachedTokens,
});

/**
 * A stream cut midway: what the model produced is charged to the budgets and
 * recorded as usage (estimated: the provider sent no usage); nothing produced,
 * the reservation is given back.
 */
export async function settlePartial(
  store: UsageStore,
  admitted: AdmittedCall,
  principal: Principal,
  request: ChatRequest,
  partial: string | undefined,
): Promise<void> {
  if (!partial) return admitted.release();
  const usage = usageOf(undefined, request.messages, partial);
  await Promise.all([admitted.settle(usage), recordUsage(store, principal, request.model, usage)]);
}

/** Gives up the id of a resource made for a call whose result was never kept (best effort). */
export function releaseOwnership(
  authorization: ResourceAuthorization,
  principal: Principal,
  resource: ResourceRef,
): Promise<void> {
  return authorization.deleteResource(principal, resource).then(
    () => undefined,
    () => undefined,
  );
}

/** Logs a stream that failed after it began: a catalogue error as a warning, anything else as an error. */
export function logStreamFailure(logger: Logger, res: Response, err: unknown, what: string): void {
  if (err instanceof AppError) logger.warn({ requestId: res.req.id, err }, `${what} stream failed`);
  else logger.error({ requestId: res.req.id, err }, `${what} stream failed`);
}
