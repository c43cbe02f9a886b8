import {
  AppError,
  type Logger,
  notFound,
  type Principal,
  principalOf,
  type ResourceAuthorization,
  requirePermission,
  ValidationFailed,
  validate,
} from "@gw/core";
import type { Router } from "express";
import type { ConversationStore } from "../../conversations/store.ts";
import { newId } from "../../ids.ts";
import { toItems } from "../../items/input.ts";
import { type Item, itemChars, toChatMessages } from "../../items/items.ts";
import { type ContextBudget, fitHistory, type History, type NewestFirstPage } from "../../llm/context.ts";
import {
  type ChatMessage,
  type ChatProvider,
  type ChatRequest,
  type Completion,
  usageOf,
} from "../../llm/provider.ts";
import { type CreateResponseInput, chatOptions, createResponseBody } from "../../responses/request.ts";
import { draftResponse, outputOf, settle } from "../../responses/response.ts";
import type { ResponseObject, ResponseStore } from "../../responses/store.ts";
import { withoutNulls } from "../../schema.ts";
import type { UsageStore } from "../../usage/store.ts";
import { requireRole } from "../access.ts";
import { type StreamedTurn, streamTurn } from "./stream-response.ts";

export interface CreateResponseDeps {
  logger: Logger;
  provider: ChatProvider;
  authorization: ResourceAuthorization;
  conversations: ConversationStore;
  responses: ResponseStore;
  usage: UsageStore;
  context: ContextBudget;
}

/**
 * `POST /api/v1/llm/responses`: one turn with the model, as JSON or as a
 * stream of Responses events. The principal owns the new `resp_…` id (unless
 * `store` is false: then nothing is kept). Earlier context comes from a
 * `conversation` (writer needed; the turn is appended to it) or from
 * `previous_response_id` (reader needed, else 404 as for an unknown id): its
 * newest items that fit the context budget. Usage is recorded only for
 * answered responses. Provider failures are errors with their catalogue
 * code: the error middleware answers them.
 */
export function registerCreateResponse(router: Router, deps: CreateResponseDeps): void {
  router.post("/llm/responses", requirePermission("responses:write"), async (req, res) => {
    const input = validate("body", createResponseBody, withoutNulls(req.body));
    const principal = principalOf(res);
    deps.provider.assertConfigured();
    const model = deps.provider.resolveModel(input.model);
    if (!model) {
      throw new ValidationFailed([
        {
          loc: ["body", "model"],
          msg: `Input should be 'auto' or one of the allowed models`,
          type: "enum",
          input: input.model,
          ctx: { expected: ["auto", ...(deps.provider.allowedModels ?? [])].join(", ") },
        },
      ]);
    }
    const turn = toItems(input.input);
    const instructions: ChatMessage[] = input.instructions
      ? [{ role: "system", content: input.instructions }]
      : [];
    const sentChars = (input.instructions?.length ?? 0) + turn.reduce((n, i) => n + itemChars(i), 0);
    const history = await earlierItems(deps, principal, input, sentChars);
    if (!history.whole && input.truncation === "disabled") {
      throw new AppError(
        "bad_request",
        "The earlier items do not fit the context budget; send truncation: 'auto' to drop the oldest",
      );
    }
    requireCallsForOutputs(history.items, turn);
    const request: ChatRequest = {
      model,
      messages: [...instructions, ...toChatMessages([...history.items, ...turn])],
      ...chatOptions(input),
    };
    const response = draftResponse(input, newId("resp"), model);
    // The caller going away stops the model's work.
    const abort = new AbortController();
    res.on("close", () => {
      if (!res.writableFinished) abort.abort(new Error("client disconnected"));
    });

    if (input.store)
      await deps.authorization.createOwnership(principal, { type: "response", id: response.id });
    if (!input.stream) {
      let completion: Completion;
      try {
        completion = await deps.provider.complete(request, abort.signal);
      } catch (err) {
        await release(deps, principal, input, response.id);
        throw err;
      }
      settle(response, completion, outputOf(completion));
      try {
        await finish(deps, principal, response, input, turn);
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
      await release(deps, principal, input, response.id); // failed before the first byte: an ordinary error answer
      throw err;
    }
    if (stream.completion) {
      settle(response, stream.completion, stream.output);
      try {
        await finish(deps, principal, response, input, turn); // stored before the client hears "completed"
      } catch (err) {
        stream.fail(err);
        await release(deps, principal, input, response.id);
        return;
      }
      stream.end(response);
      return;
    }
    // The stream broke after it began: what the model produced still counts, nothing else was created.
    if (stream.partial) {
      await deps.usage.record({
        org: principal.org,
        keyId: principal.keyId,
        user: principal.user,
        model,
        usage: usageOf(undefined, request.messages, stream.partial),
      });
    }
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
  if (!input.store) return Promise.resolve();
  return deps.authorization.deleteResource(principal, { type: "response", id }).then(
    () => undefined,
    () => undefined,
  );
}

/**
 * The earlier items sent with the turn, newest kept, as many as fit the
 * context budget beside `sentChars`: a conversation's (writer needed), or the
 * chain of responses ending in `previous_response_id` (reader needed on it;
 * otherwise 404, exactly as for an id that does not exist).
 */
async function earlierItems(
  deps: CreateResponseDeps,
  principal: Principal,
  input: CreateResponseInput,
  sentChars: number,
): Promise<History> {
  const pageSize = Math.min(deps.context.maxItems, 100);
  if (input.conversation) {
    const id = input.conversation;
    await requireRole(deps.authorization, principal, { type: "conversation", id }, "writer");
    return fitHistory(deps.conversations.newestFirst(principal.org, id, pageSize), sentChars, deps.context);
  }
  if (input.previous_response_id) {
    const id = input.previous_response_id;
    await requireRole(deps.authorization, principal, { type: "response", id }, "reader");
    const previous = await deps.responses.get(principal.org, id);
    if (!previous) throw notFound(`No response ${id}`);
    return fitHistory(chainNewestFirst(deps.responses, principal.org, previous), sentChars, deps.context);
  }
  return { items: [], whole: true };
}

/**
 * A response's input and output, newest first, then those of the response
 * it continued, and so on: the context it carries. The caller was checked
 * for the newest one only; the ones before it are part of what it carries.
 */
async function* chainNewestFirst(
  store: ResponseStore,
  org: string,
  newest: ResponseObject,
): AsyncGenerator<NewestFirstPage> {
  let response: ResponseObject | undefined = newest;
  while (response) {
    const [input, previous]: [Item[], ResponseObject | undefined] = await Promise.all([
      store.input(org, response.id).then((items) => items ?? []),
      response.previous_response_id ? store.get(org, response.previous_response_id) : undefined,
    ]);
    yield { items: [...input, ...response.output].reverse(), hasMore: previous !== undefined };
    response = previous;
  }
}

/** A function call output must answer a call made before it (422 otherwise, as a provider would refuse it). */
function requireCallsForOutputs(history: Item[], turn: Item[]): void {
  const calls = new Set(history.flatMap((i) => (i.type === "function_call" ? [i.call_id] : [])));
  turn.forEach((item, index) => {
    if (item.type === "function_call") calls.add(item.call_id);
    else if (item.type === "function_call_output" && !calls.has(item.call_id)) {
      throw new ValidationFailed([
        {
          loc: ["body", "input", index, "call_id"],
          msg: "No function call with this call_id comes before this output",
          type: "value_error",
          input: item.call_id,
        },
      ]);
    }
  });
}

/** Stores the response (unless `store` is false), appends the turn to its conversation and records usage. */
async function finish(
  deps: CreateResponseDeps,
  principal: Principal,
  response: ResponseObject,
  input: CreateResponseInput,
  turn: Item[],
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
    deps.usage.record({
      org: principal.org,
      keyId: principal.keyId,
      user: principal.user,
      model: response.model,
      usage: {
        input_tokens: response.usage!.input_tokens,
        output_tokens: response.usage!.output_tokens,
        total_tokens: response.usage!.total_tokens,
      },
    }),
  ]);
}
