import { responseFailure } from "@gw/core/errors";
import type { Ids } from "../ids.ts";
import { ID_PREFIX } from "../items/items.ts";
import type { Completion, TokenLogprob, Usage } from "../llm/provider.ts";
import { DEFAULT_NUM_RESULTS } from "../vector-stores/search-request.ts";
import type { CreateResponseInput } from "./request.ts";
import type { OutputItem, ResponseObject, ResponseTool, ResponseUsage } from "./store.ts";

/**
 * The response object before the model answers, created at `now` (ms since
 * the epoch): the request's settings, echoed as OpenAI echoes them.
 */
export function draftResponse(
  input: CreateResponseInput,
  id: string,
  model: string,
  now: number,
): ResponseObject {
  const tools: ResponseTool[] = (input.tools ?? []).map((t) =>
    t.type === "file_search"
      ? {
          type: "file_search",
          vector_store_ids: t.vector_store_ids,
          max_num_results: t.max_num_results ?? DEFAULT_NUM_RESULTS,
          filters: t.filters ?? null,
          ranking_options: {
            ranker: t.ranking_options?.ranker ?? "auto",
            score_threshold: t.ranking_options?.score_threshold ?? 0,
          },
        }
      : t.type === "mcp"
        ? {
            type: "mcp",
            server_label: t.server_label,
            server_url: t.server_url,
            allowed_tools: t.allowed_tools ?? null,
            require_approval: t.require_approval ?? "always",
            ...(t.server_description ? { server_description: t.server_description } : {}),
          }
        : {
            type: "function",
            name: t.name,
            description: t.description ?? null,
            parameters: t.parameters ?? null,
            strict: t.strict ?? null,
          },
  );
  const verbosity = input.text?.verbosity;
  return {
    id,
    object: "response",
    created_at: Math.floor(now / 1000),
    status: "in_progress",
    background: false,
    completed_at: null,
    error: null,
    incomplete_details: null,
    instructions: input.instructions ?? null,
    max_output_tokens: input.max_output_tokens ?? null,
    max_tool_calls: input.max_tool_calls ?? null,
    model,
    output: [],
    parallel_tool_calls: input.parallel_tool_calls,
    previous_response_id: input.previous_response_id ?? null,
    conversation: input.conversation ? { id: input.conversation } : null,
    reasoning: {
      effort: input.reasoning?.effort ?? null,
      summary: input.reasoning?.summary ?? input.reasoning?.generate_summary ?? null,
    },
    prompt_cache_key: input.prompt_cache_key ?? null,
    safety_identifier: input.safety_identifier ?? null,
    service_tier: input.service_tier ?? null,
    top_logprobs: input.top_logprobs ?? null,
    store: input.store,
    temperature: input.temperature ?? null,
    text: { format: input.text?.format ?? { type: "text" }, ...(verbosity ? { verbosity } : {}) },
    tool_choice: input.tool_choice ?? "auto",
    tools,
    top_p: input.top_p ?? null,
    truncation: input.truncation,
    // OpenAI leaves out `user` (a string, never null) when it was not given.
    ...(input.user !== undefined ? { user: input.user } : {}),
    metadata: input.metadata ?? {},
  };
}

/** Why a response stopped short, from the model's finish reason; `null` when it is complete. */
export function incompleteReason(completion: Completion): ResponseObject["incomplete_details"] {
  if (completion.finishReason === "length") return { reason: "max_output_tokens" };
  if (completion.finishReason === "content_filter") return { reason: "content_filter" };
  return null;
}

/** An output text part as OpenAI sends and stores it (with its tokens' logprobs when they were asked for). */
export const outputText = (text: string, logprobs: TokenLogprob[] = []) => ({
  type: "output_text" as const,
  text,
  annotations: [],
  logprobs,
});

/** The model's function calls a response keeps: the first `max_tool_calls` (all without it). */
export const keptToolCalls = (completion: Completion, maxToolCalls: number | null) =>
  maxToolCalls === null ? completion.toolCalls : completion.toolCalls.slice(0, maxToolCalls);

/** The output items of an answer: its text as a message (unless it only called tools), then its tool calls. */
export function outputOf(completion: Completion, ids: Ids, maxToolCalls: number | null = null): OutputItem[] {
  const status = incompleteReason(completion) ? "incomplete" : "completed";
  const output: OutputItem[] = [];
  const calls = keptToolCalls(completion, maxToolCalls);
  if (completion.text || calls.length === 0) {
    output.push({
      type: "message",
      id: ids.newId(ID_PREFIX.message),
      status,
      role: "assistant",
      content: [outputText(completion.text, completion.logprobs)],
    });
  }
  for (const call of calls) {
    output.push({
      type: "function_call",
      id: ids.newId(ID_PREFIX.function_call),
      status: "completed",
      call_id: call.id,
      name: call.name,
      arguments: call.arguments,
    });
  }
  return output;
}

/**
 * The response once the model has answered with `output` at `now` (ms since
 * the epoch): completed, or incomplete when it was cut short.
 */
export function settle(
  response: ResponseObject,
  completion: Completion,
  output: OutputItem[],
  now: number,
): void {
  const incomplete = incompleteReason(completion);
  response.status = incomplete ? "incomplete" : "completed";
  response.incomplete_details = incomplete;
  response.completed_at = incomplete ? null : Math.floor(now / 1000);
  response.model = completion.model;
  response.output = output;
  response.usage = responseUsage(completion.usage, completion.usageDetails);
}

/**
 * The response as it failed, for `response.failed`: the error as the
 * catalogue tells it (`responseFailure`: an `AppError`'s fixed message, never
 * a provider's text; anything unexpected gets a generic one).
 */
export function failed(
  response: ResponseObject,
  output: OutputItem[],
  err: unknown,
  usage: Usage | undefined,
): ResponseObject {
  // What was cut short is incomplete; what was finished stays so.
  const cut = output.map(
    (item): OutputItem =>
      (item.type === "message" || item.type === "function_call") && item.status === "in_progress"
        ? { ...item, status: "incomplete" as const }
        : item,
  );
  return {
    ...response,
    status: "failed",
    output: cut,
    error: responseFailure(err, "The response failed"),
    ...(response.usage ? {} : usage ? { usage: responseUsage(usage) } : {}),
  };
}

/** Usage in the Responses shape, from the model's counts (or estimates) and their details. */
export function responseUsage(
  usage: Usage,
  details: Completion["usageDetails"] = { cachedTokens: 0, reasoningTokens: 0 },
): ResponseUsage {
  return {
    input_tokens: usage.input_tokens,
    input_tokens_details: {
      cached_tokens: details.cachedTokens,
      cache_write_tokens: details.cacheWriteTokens ?? 0,
    },
    output_tokens: usage.output_tokens,
    output_tokens_details: { reasoning_tokens: details.reasoningTokens },
    total_tokens: usage.total_tokens,
  };
}
