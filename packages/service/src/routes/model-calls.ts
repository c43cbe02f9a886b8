import type { Logger, Principal, ResourceAuthorization, ResourceRef } from "@gw/core";
import { AppError } from "@gw/core";
import type { Response } from "express";
import type { Usage } from "../llm/provider.ts";
import type { UsageStore } from "../usage/store.ts";

/** What both model-calling routes (responses, chat completions) do around the call. */

/** Records one model call's tokens for the principal: its organization, key and end user. */
export function recordUsage(
  store: UsageStore,
  principal: Principal,
  model: string,
  usage: Usage,
): Promise<void> {
  return store.record({ org: principal.org, keyId: principal.keyId, user: principal.user, model, usage });
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
