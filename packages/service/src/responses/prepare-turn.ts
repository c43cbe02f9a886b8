import type { ResourceAuthorization, Role } from "@gw/core/authz";
import { AppError, notFound, ValidationFailed } from "@gw/core/errors";
import type { Principal } from "@gw/core/principal";
import type { ConversationStore } from "../conversations/store.ts";
import { toTurn } from "../items/input.ts";
import { type Item, itemChars, toChatMessages } from "../items/items.ts";
import { type ContextBudget, fitHistory, type History, type NewestFirstPage } from "../llm/context.ts";
import { requireUsableModel, resolveModel } from "../llm/models.ts";
import type { ChatMessage, ChatProvider, ChatRequest } from "../llm/provider.ts";
import { requireRole } from "../routes/access.ts";
import { readableItem } from "./item-reference.ts";
import { type CreateResponseInput, chatOptions } from "./request.ts";
import type { ResponseObject, ResponseStore } from "./store.ts";

export interface TurnDeps {
  provider: ChatProvider;
  authorization: ResourceAuthorization;
  conversations: ConversationStore;
  responses: ResponseStore;
  context: ContextBudget;
}

export interface PreparedTurn {
  model: string;
  /** The new input as stored items (references resolved, fresh ids). */
  turn: Item[];
  /** The model call: instructions, the earlier items that fit, the turn, the request's options. */
  request: ChatRequest;
}

/**
 * What a response sends to the model, checked as creating it checks it:
 * the model (offered, and allowed for the key), the input's item references
 * (readable, else 404), the earlier context (`conversationRole` on a
 * conversation, reader on `previous_response_id`, else 404) within the
 * context budget (`truncation: "disabled"` refuses to drop any), and tool
 * outputs that answer a call. Creates nothing.
 */
export async function prepareTurn(
  deps: TurnDeps,
  principal: Principal,
  input: CreateResponseInput,
  conversationRole: Role,
): Promise<PreparedTurn> {
  const model = resolveModel(deps.provider, input.model);
  requireUsableModel(principal, model);
  const turn = await toTurn(input.input, (id) => readableItem(deps, principal, id));
  const instructions: ChatMessage[] = input.instructions
    ? [{ role: "system", content: input.instructions }]
    : [];
  const sentChars = (input.instructions?.length ?? 0) + turn.reduce((n, i) => n + itemChars(i), 0);
  const history = await earlierItems(deps, principal, input, sentChars, conversationRole);
  if (!history.whole && input.truncation === "disabled") {
    throw new AppError(
      "bad_request",
      "The earlier items do not fit the context budget; send truncation: 'auto' to drop the oldest",
      { param: "truncation" },
    );
  }
  requireCallsForOutputs(history.items, turn);
  const request: ChatRequest = {
    model,
    messages: [...instructions, ...toChatMessages([...history.items, ...turn])],
    ...chatOptions(input),
  };
  return { model, turn, request };
}

/**
 * The earlier items sent with the turn, newest kept, as many as fit the
 * context budget beside `sentChars`: a conversation's (`conversationRole` needed), or the
 * chain of responses ending in `previous_response_id` (reader needed on it;
 * otherwise 404, exactly as for an id that does not exist).
 */
async function earlierItems(
  deps: TurnDeps,
  principal: Principal,
  input: CreateResponseInput,
  sentChars: number,
  conversationRole: Role,
): Promise<History> {
  const pageSize = Math.min(deps.context.maxItems, 100);
  if (input.conversation) {
    const id = input.conversation;
    await requireRole(deps.authorization, principal, { type: "conversation", id }, conversationRole);
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
