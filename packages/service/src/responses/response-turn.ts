import type { ResourceAuthorization } from "@gw/core/authz";
import type { Clock } from "@gw/core/clock";
import { notFound } from "@gw/core/errors";
import type { Logger } from "@gw/core/logger";
import type { Principal } from "@gw/core/principal";
import type { WindowState } from "@gw/core/windows";
import type { EventSink } from "../calls/event-sink.ts";
import { type ModelCallDeps, recordUsage, recordUsageSoon } from "../calls/model-call.ts";
import type { CacheResult } from "../calls/response-cache.ts";
import type { ConversationStore } from "../conversations/store.ts";
import type { Ids } from "../ids.ts";
import type { Item } from "../items/items.ts";
import type { ContextBudget } from "../llm/context.ts";
import type { ChatProvider, ChatRequest, Completion } from "../llm/provider.ts";
import type { VectorSearchDeps } from "../vector-stores/search.ts";
import type { NewApproval } from "./approvals.ts";
import type { FileSearchRun } from "./file-search.ts";
import type { HostedMcpConfig } from "./hosted-mcp-proxy.ts";
import type { CreateResponseInput } from "./request.ts";
import type { ResponseObject, ResponseStore } from "./store.ts";
import type { StreamedTurn } from "./stream.ts";

/*
 * What every kind of response turn shares (the plain turn of turn.ts and the
 * hosted MCP turn of hosted-mcp.ts): its dependencies, its shape, and how it
 * is kept. Both import it; neither imports the other's internals.
 */

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
  /** What the response cache did (`X-Gateway-Cache`); unset: a turn it never keeps (hosted MCP tools), `bypass`. */
  cache?: CacheResult;
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
  // Sent before the response is stored and answered; the answer does not wait for Redis's reply.
  recordUsageSoon(deps.usage, principal, response.model, ...turnUsage(response, completion));
  // The response and the turn it adds to its conversation are stored together, or neither is.
  if (input.store)
    await deps.responses.save(
      principal.org,
      response,
      turn,
      conversation ? { conversations: deps.conversations, conversation, items } : undefined,
      { user: principal.user, requests: approvals },
    );
  else if (conversation && !(await deps.conversations.append(principal.org, conversation, items)))
    throw notFound(`No conversation ${conversation}`);
}

/** Records the usage of a response the model answered, priced as the deployment that served it. */
export function recordTurnUsage(
  deps: Pick<ResponseTurnDeps, "usage">,
  principal: Principal,
  response: ResponseObject,
  completion: Completion,
): Promise<void> {
  return recordUsage(deps.usage, principal, response.model, ...turnUsage(response, completion));
}

/** A response's tokens and pricing, as usage records them. */
function turnUsage(response: ResponseObject, completion: Completion) {
  return [
    {
      input_tokens: response.usage!.input_tokens,
      output_tokens: response.usage!.output_tokens,
      total_tokens: response.usage!.total_tokens,
    },
    {
      cachedTokens: completion.usageDetails.cachedTokens,
      servedBy: completion.servedBy,
      cacheHit: completion.cacheHit,
    },
  ] as const;
}
