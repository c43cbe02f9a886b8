import type { ResourceAuthorization } from "@gw/core/authz";
import type { Clock } from "@gw/core/clock";
import { AppError, notFound } from "@gw/core/errors";
import type { Logger } from "@gw/core/logger";
import type { Principal } from "@gw/core/principal";
import type { WindowState } from "@gw/core/windows";
import type { Caller } from "../budgets/admit-model-call.ts";
import type { EventSink } from "../calls/event-sink.ts";
import { admitCall, type ModelCallDeps, recordUsage } from "../calls/model-call.ts";
import type { ConversationStore } from "../conversations/store.ts";
import type { Ids } from "../ids.ts";
import type { Item } from "../items/items.ts";
import type { ContextBudget } from "../llm/context.ts";
import type { ChatProvider, ChatRequest, Completion } from "../llm/provider.ts";
import type { VectorSearchDeps } from "../vector-stores/search.ts";
import type { NewApproval } from "./approvals.ts";
import { citationsFor, type FileSearchRun, runFileSearch } from "./file-search.ts";
import { type HostedMcpConfig, startHostedTurn } from "./hosted-mcp.ts";
import { prepareTurn } from "./prepare-turn.ts";
import type { CreateResponseInput } from "./request.ts";
import { draftResponse, outputOf, settle } from "./response.ts";
import type { OutputItem, ResponseObject, ResponseStore } from "./store.ts";
import type { StreamedTurn } from "./stream.ts";

export interface ResponseTurnDeps extends ModelCallDeps, Omit<VectorSearchDeps, "authorization"> {
  authorization: ResourceAuthorization;
  logger: Logger;
  conversations: ConversationStore;
  responses: ResponseStore;
  context: ContextBudget;
  /** The process's clock: a response's `created_at` and `completed_at`. */
  clock: Clock;
  /** Its ids, stamped with the clock's time: responses' and their items'. */
  ids: Ids;
  /** How hosted MCP tools reach the gateway's proxy; none: a request with one is 422. */
  hostedMcp?: HostedMcpConfig;
}

/** A turn checked and admitted: run it once, as JSON or as a stream of Responses events. */
export interface ResponseTurn {
  /** The budget windows after admission (the answer's rate-limit headers). */
  windows: WindowState[];
  /** The response being made, and the request for the model (what a stream writer needs). */
  response: ResponseObject;
  request: ChatRequest;
  /** The provider the stream writer streams from: the turn's output checked by its guardrails. */
  provider: ChatProvider;
  /** The guardrails that redacted the turn's input or output (`x-guardrail-redacted`). */
  redactedBy(): string[];
  /** The model's answer as a response object, stored (unless `store` is false) with its usage recorded. */
  answer(signal: AbortSignal): Promise<ResponseObject>;
  /** Streams the turn through `start` (the route's stream writer); the response is stored before `response.completed`. */
  stream(start: () => Promise<StreamedTurn>, signal: AbortSignal): Promise<void>;
  /**
   * A turn of several model calls and tool calls (hosted MCP tools) streams
   * its own events as each thing happens (`HostedEvents`), and `stream` is
   * not used. `beforeOpen` runs before the stream's first byte (its headers).
   */
  streamLive?(sink: EventSink, signal: AbortSignal, beforeOpen: () => void): Promise<void>;
  /** The turn's `file_search` tool's search, run before the model call: a stream shows it first. */
  fileSearch?: FileSearchRun;
}

/**
 * One turn with the model. The principal owns the new `resp_…` id (unless
 * `store` is false: then nothing is kept). Earlier context comes from a
 * `conversation` (writer needed; the turn is appended to it) or from
 * `previous_response_id` (reader needed, else 404 as for an unknown id): its
 * newest items that fit the context budget. Token and spend budgets are
 * reserved here, before the model is called, and settled once with what it
 * used. Usage is recorded only for answered responses.
 */
export async function startTurn(
  deps: ResponseTurnDeps,
  caller: Caller,
  input: CreateResponseInput,
): Promise<ResponseTurn> {
  const { principal } = caller;
  const fileSearch = input.tools?.find((t) => t.type === "file_search");
  if (input.tools?.some((t) => t.type === "mcp")) {
    if (fileSearch)
      throw new AppError(
        "bad_request",
        "A file_search tool and hosted MCP tools in one request are not supported",
        {
          param: "tools",
        },
      );
    if (!deps.hostedMcp)
      throw new AppError("bad_request", "Hosted MCP tools are not configured", { param: "tools" });
    return startHostedTurn({ ...deps, hostedMcp: deps.hostedMcp }, caller, input);
  }
  deps.provider.assertConfigured();
  const { model, turn, request } = await prepareTurn(deps, principal, input, "writer");
  const response = draftResponse(input, deps.ids.newId("resp"), model, deps.clock.wall());
  // The search runs before admission, so the chunks it gives the model are counted in the prompt admitted.
  const searched: FileSearchRun | undefined = fileSearch
    ? await runFileSearch(
        deps,
        caller,
        fileSearch,
        turn,
        input.include?.includes("file_search_call.results") === true,
        new AbortController().signal,
      )
    : undefined;
  if (searched) request.messages = [...request.messages, ...searched.messages];
  const call = await admitCall<ResponseObject, StreamedTurn>(deps, {
    caller,
    request,
    owned: input.store ? { type: "response", id: response.id } : undefined,
    keep: async (completion, streamed) => {
      settle(
        response,
        completion,
        streamed
          ? streamed.output
          : withFileSearch(searched, outputOf(completion, deps.ids, response.max_tool_calls)),
        deps.clock.wall(),
      );
      await keep(deps, principal, response, input, turn, completion);
      return response;
    },
    // A response alone can be taken back; a turn appended to a conversation is kept once it is owned.
    ...(input.conversation ? {} : { discard: () => deps.responses.delete(principal.org, response.id) }),
  });
  return {
    windows: call.windows,
    response,
    request,
    provider: call.provider,
    redactedBy: () => call.redactedBy(),
    answer: (signal) => call.answer(signal),
    stream: (start, signal) => call.stream(start, signal),
    ...(searched ? { fileSearch: searched } : {}),
  };
}

/** The output of a turn that searched files: its `file_search_call` first, the answer's text citing the files. */
function withFileSearch(searched: FileSearchRun | undefined, output: OutputItem[]): OutputItem[] {
  if (!searched) return output;
  for (const item of output)
    if (item.type === "message")
      for (const part of item.content)
        if (part.type === "output_text") part.annotations = citationsFor(searched, part.text);
  return [searched.item, ...output];
}

/**
 * Stores the response (unless `store` is false) with the approval requests
 * of its hosted MCP tools, appends the turn to its conversation and records usage.
 */
export async function keep(
  deps: ResponseTurnDeps,
  principal: Principal,
  response: ResponseObject,
  input: CreateResponseInput,
  turn: Item[],
  completion: Completion,
  approvals: NewApproval[] = [],
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
          { user: principal.user, requests: approvals },
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
      { cachedTokens: completion.usageDetails.cachedTokens, servedBy: completion.servedBy },
    ),
  ]);
}
