import { fitsObjectId, type ResourceAuthorization, type ResourceRef, type Role } from "@gw/core/authz";
import { AppError, forbidden, notFound, ValidationFailed } from "@gw/core/errors";
import type { Principal } from "@gw/core/principal";
import type { ConversationStore } from "../conversations/store.ts";
import type { Ids } from "../ids.ts";
import { toTurn } from "../items/input.ts";
import { type Item, itemChars, toChatMessages } from "../items/items.ts";
import { type ContextBudget, fitHistory, type History, type NewestFirstPage } from "../llm/context.ts";
import { routeOf } from "../llm/models.ts";
import type { ChatMessage, ChatProvider, ChatRequest } from "../llm/provider.ts";
import { findReferencedItem, unreadableItem } from "./item-reference.ts";
import { type CreateResponseInput, chatOptions } from "./request.ts";
import type { ResponseObject, ResponseStore } from "./store.ts";

export interface TurnDeps {
  provider: ChatProvider;
  authorization: ResourceAuthorization;
  conversations: ConversationStore;
  responses: ResponseStore;
  context: ContextBudget;
  /** The new input's item ids. */
  ids: Ids;
}

export interface PreparedTurn {
  model: string;
  /** The new input as stored items (references resolved, fresh ids). */
  turn: Item[];
  /** The model call: instructions, the earlier items that fit, the turn, the request's options. */
  request: ChatRequest;
  /** The stored resources the turn's context was read from (its previous response, conversation, referenced items' places). */
  reads: ResourceRef[];
}

/**
 * What a response sends to the model, checked as creating it checks it:
 * the model (offered, and allowed for the key), the input's item references
 * (readable, else 404), the earlier context (`conversationRole` on a
 * conversation, reader on `previous_response_id` and on every earlier
 * response of its chain that the context draws from, else 404) within the
 * context budget (`truncation: "disabled"` refuses to drop any), and tool
 * outputs that answer a call. Every stored response and conversation the
 * context draws from is checked at once, in one bulk check made after they
 * are read and before anything of them is used: a grant revoked anywhere
 * along a chain stops the next turn. Creates nothing.
 */
export async function prepareTurn(
  deps: TurnDeps,
  principal: Principal,
  input: CreateResponseInput,
  conversationRole: Role,
): Promise<PreparedTurn> {
  const { model, route } = routeOf(deps.provider, principal, input.model);
  const access = new ContextAccess();
  const turn = await toTurn(
    input.input,
    async (id) => {
      const found = await findReferencedItem(deps, principal, id);
      access.requireAny(found.places, "reader", () => unreadableItem(id));
      return found.item;
    },
    deps.ids,
  );
  const instructions: ChatMessage[] = input.instructions
    ? [{ role: "system", content: input.instructions }]
    : [];
  const sentChars = (input.instructions?.length ?? 0) + turn.reduce((n, i) => n + itemChars(i), 0);
  const history = await earlierItems(deps, principal, input, sentChars, conversationRole, access);
  await access.check(deps.authorization, principal);
  if (!history.whole && input.truncation === "disabled") {
    throw new AppError(
      "bad_request",
      "The earlier items do not fit the context budget; send truncation: 'auto' to drop the oldest",
      { param: "truncation" },
    );
  }
  requireCallsForOutputs(history.items, turn);
  const context = toChatMessages([...history.items, ...turn]);
  if (context.length === 0) {
    // Only items a model never reads (a `file_search_call` is a search's record): nothing to answer.
    throw new ValidationFailed([
      {
        loc: ["body", "input"],
        msg: "The input gives the model nothing to read: send a message (a file_search_call item is a search's record, not sent to the model)",
        type: "value_error",
      },
    ]);
  }
  const request: ChatRequest = {
    model,
    route,
    messages: [...instructions, ...context],
    ...chatOptions(input),
  };
  return { model, turn, request, reads: access.resources() };
}

/**
 * What the principal must hold on the stored responses and conversations a
 * turn draws from, in the order the turn names them, each with the error
 * that answers its absence; `check` decides all of them in one bulk check
 * and throws the first one's error.
 */
class ContextAccess {
  private readonly rules: { places: ResourceRef[]; role: Role; error: () => Error }[] = [];

  /** The principal must hold `role` on at least one of `places`. */
  requireAny(places: ResourceRef[], role: Role, error: () => Error): void {
    this.rules.push({ places, role, error });
  }

  /** A conversation or response, as `requireRole` words it: 404 without reader, 403 without `role`. */
  requireRole(resource: ResourceRef, role: Role): void {
    const label = resource.type;
    this.requireAny([resource], "reader", () => notFound(`No ${label} ${resource.id}`));
    if (role !== "reader")
      this.requireAny([resource], role, () => forbidden(`This ${label} needs the '${role}' role`));
  }

  /** Every resource a rule named, once each, in the order first named. */
  resources(): ResourceRef[] {
    const seen = new Map<string, ResourceRef>();
    for (const rule of this.rules)
      for (const resource of rule.places) seen.set(`${resource.type}\u0000${resource.id}`, resource);
    return [...seen.values()];
  }

  async check(authorization: ResourceAuthorization, principal: Principal): Promise<void> {
    const asked = new Map<string, { resource: ResourceRef; role: Role }>();
    const keyOf = (resource: ResourceRef, role: Role) => `${resource.type}\u0000${resource.id}\u0000${role}`;
    for (const rule of this.rules)
      for (const resource of rule.places)
        asked.set(keyOf(resource, rule.role), { resource, role: rule.role });
    const checks = [...asked.values()];
    const allowed = await authorization.checkAll(principal, checks);
    const granted = new Set(checks.filter((_, i) => allowed[i]).map((c) => keyOf(c.resource, c.role)));
    for (const rule of this.rules) {
      if (!rule.places.some((resource) => granted.has(keyOf(resource, rule.role)))) throw rule.error();
    }
  }
}

/**
 * The earlier items sent with the turn, newest kept, as many as fit the
 * context budget beside `sentChars`: a conversation's (`conversationRole`
 * needed), or the chain of responses ending in `previous_response_id`
 * (reader needed on it, and on each earlier response whose items are kept;
 * otherwise 404, exactly as for an id that does not exist). What is needed
 * goes to `access`, checked once all is read.
 */
async function earlierItems(
  deps: TurnDeps,
  principal: Principal,
  input: CreateResponseInput,
  sentChars: number,
  conversationRole: Role,
  access: ContextAccess,
): Promise<History> {
  const pageSize = Math.min(deps.context.maxItems, 100);
  if (input.conversation) {
    const id = input.conversation;
    if (!fitsObjectId(principal.org, id)) throw notFound("No conversation with an id that long");
    access.requireRole({ type: "conversation", id }, conversationRole);
    return fitHistory(deps.conversations.newestFirst(principal.org, id, pageSize), sentChars, deps.context);
  }
  if (input.previous_response_id) {
    const id = input.previous_response_id;
    if (!fitsObjectId(principal.org, id)) throw notFound("No response with an id that long");
    access.requireRole({ type: "response", id }, "reader");
    const previous = await deps.responses.get(principal.org, id);
    if (!previous) {
      // Absent: the same 404 as unreadable, unless something named before it is unreadable (that answers first).
      await access.check(deps.authorization, principal);
      throw notFound(`No response ${id}`);
    }
    const sources = new Map<string, string>();
    const visited: string[] = [];
    const history = await fitHistory(
      chainNewestFirst(deps.responses, principal.org, previous, (response, items) => {
        visited.push(response);
        for (const item of items) sources.set(item.id, response);
      }),
      sentChars,
      deps.context,
    );
    const drawn = new Set(history.items.map((item) => sources.get(item.id)));
    for (const response of visited.slice(1)) {
      if (drawn.has(response))
        access.requireAny([{ type: "response", id: response }], "reader", () =>
          notFound(`No response ${response}`),
        );
    }
    return history;
  }
  return { items: [], whole: true };
}

/**
 * A response's input and output, newest first, then those of the response
 * it continued, and so on: the context it carries. `seen` is told each
 * response read and its items, so the caller can check every one it draws from.
 */
async function* chainNewestFirst(
  store: ResponseStore,
  org: string,
  newest: ResponseObject,
  seen: (response: string, items: Item[]) => void,
): AsyncGenerator<NewestFirstPage> {
  let response: ResponseObject | undefined = newest;
  while (response) {
    const [input, previous]: [Item[], ResponseObject | undefined] = await Promise.all([
      store.input(org, response.id).then((items) => items ?? []),
      response.previous_response_id ? store.get(org, response.previous_response_id) : undefined,
    ]);
    const items = [...input, ...response.output];
    seen(response.id, items);
    yield { items: items.reverse(), hasMore: previous !== undefined };
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
