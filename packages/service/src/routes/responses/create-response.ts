import {
  type Logger,
  notFound,
  type Principal,
  principalOf,
  type ResourceAuthorization,
  requirePermission,
  validate,
} from "@gw/core";
import type { Router } from "express";
import { admitModelCall, type BudgetDeps } from "../../budgets/admit-model-call.ts";
import type { ConversationStore } from "../../conversations/store.ts";
import { newId } from "../../ids.ts";
import type { Item } from "../../items/items.ts";
import type { ContextBudget } from "../../llm/context.ts";
import type { ChatProvider, Completion } from "../../llm/provider.ts";
import { type CreateResponseInput, createResponseBody } from "../../responses/request.ts";
import { draftResponse, outputOf, settle } from "../../responses/response.ts";
import type { ResponseObject, ResponseStore } from "../../responses/store.ts";
import { withoutNulls } from "../../schema.ts";
import type { UsageStore } from "../../usage/store.ts";
import { recordUsage, releaseOwnership, settlePartial, usedBy } from "../model-calls.ts";
import { prepareTurn } from "./prepare-turn.ts";
import { type StreamedTurn, streamTurn } from "./stream-response.ts";

export interface CreateResponseDeps {
  logger: Logger;
  provider: ChatProvider;
  authorization: ResourceAuthorization;
  conversations: ConversationStore;
  responses: ResponseStore;
  usage: UsageStore;
  context: ContextBudget;
  budgets: BudgetDeps;
}

/**
 * `POST /api/v1/llm/responses`: one turn with the model, as JSON or as a
 * stream of Responses events. The principal owns the new `resp_…` id (unless
 * `store` is false: then nothing is kept). Earlier context comes from a
 * `conversation` (writer needed; the turn is appended to it) or from
 * `previous_response_id` (reader needed, else 404 as for an unknown id): its
 * newest items that fit the context budget. Token and spend budgets are
 * reserved before the model is called and settled once with what it used.
 * Usage is recorded only for answered responses. Provider failures are
 * errors with their catalogue code: the error middleware answers them.
 */
export function registerCreateResponse(router: Router, deps: CreateResponseDeps): void {
  router.post("/llm/responses", requirePermission("responses:write"), async (req, res) => {
    const input = validate("body", createResponseBody, withoutNulls(req.body));
    const principal = principalOf(res);
    deps.provider.assertConfigured();
    const { model, turn, request } = await prepareTurn(deps, principal, input, "writer");
    // Budgets are reserved before anything is created or sent; every way out below settles them once.
    const admitted = await admitModelCall(deps.budgets, res, request);
    request.maxOutputTokens = admitted.maxOutputTokens;
    const response = draftResponse(input, newId("resp"), model);
    // The caller going away stops the model's work.
    const abort = new AbortController();
    res.on("close", () => {
      if (!res.writableFinished) abort.abort(new Error("client disconnected"));
    });

    try {
      if (input.store)
        await deps.authorization.createOwnership(principal, { type: "response", id: response.id });
    } catch (err) {
      await admitted.release();
      throw err;
    }
    if (!input.stream) {
      let completion: Completion;
      try {
        completion = await deps.provider.complete(request, abort.signal);
      } catch (err) {
        await Promise.all([admitted.release(), release(deps, principal, input, response.id)]);
        throw err;
      }
      await admitted.settle(usedBy(completion));
      settle(response, completion, outputOf(completion));
      try {
        await finish(deps, principal, response, input, turn, completion, model);
      } catch (err) {
        // Not stored (PostgreSQL away…): its id must not keep an owner relationship that nothing will ever sweep.
        await release(deps, principal, input, response.id);
        throw err;
      }
      res.json(response);
      return;
    }

    let stream: StreamedTurn;
    try {
      stream = await streamTurn(res, { ...deps, response, request, signal: abort.signal });
    } catch (err) {
      // failed before the first byte: an ordinary error answer
      await Promise.all([admitted.release(), release(deps, principal, input, response.id)]);
      throw err;
    }
    if (stream.completion) {
      await admitted.settle(usedBy(stream.completion));
      settle(response, stream.completion, stream.output);
      try {
        await finish(deps, principal, response, input, turn, stream.completion, model); // stored before the client hears "completed"
      } catch (err) {
        stream.fail(err);
        await release(deps, principal, input, response.id);
        return;
      }
      stream.end(response);
      return;
    }
    // The stream broke after it began: what the model produced still counts, nothing else was created.
    await settlePartial(deps.usage, admitted, principal, request, stream.partial);
    await release(deps, principal, input, response.id);
  });
}

/** Gives up the id of a response that was never completed (best effort). */
function release(
  deps: CreateResponseDeps,
  principal: Principal,
  input: CreateResponseInput,
  id: string,
): Promise<void> {
  return input.store
    ? releaseOwnership(deps.authorization, principal, { type: "response", id })
    : Promise.resolve();
}

/** Stores the response (unless `store` is false), appends the turn to its conversation and records usage. */
async function finish(
  deps: CreateResponseDeps,
  principal: Principal,
  response: ResponseObject,
  input: CreateResponseInput,
  turn: Item[],
  completion: Completion,
  requestedModel: string,
): Promise<void> {
  const conversation = input.conversation;
  const items = [...turn, ...response.output];
  await Promise.all([
    // The response and the turn it adds to its conversation are stored together, or neither is.
    input.store
      ? deps.responses.save(
          principal.org,
          response,
          turn,
          conversation ? { conversations: deps.conversations, conversation, items } : undefined,
        )
      : conversation
        ? deps.conversations.append(principal.org, conversation, items).then((appended) => {
            if (!appended) throw notFound(`No conversation ${conversation}`);
          })
        : undefined,
    recordUsage(
      deps.usage,
      principal,
      response.model,
      {
        input_tokens: response.usage!.input_tokens,
        output_tokens: response.usage!.output_tokens,
        total_tokens: response.usage!.total_tokens,
      },
      { cachedTokens: completion.usageDetails.cachedTokens, pricedAs: requestedModel },
    ),
  ]);
}
