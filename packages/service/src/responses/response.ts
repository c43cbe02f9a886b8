import { responseFailure } from "@gw/core/errors";
import { newId } from "../ids.ts";
import { ID_PREFIX } from "../items/items.ts";
import type { Completion } from "../llm/provider.ts";
import type { CreateResponseInput } from "./request.ts";
import type { OutputItem, ResponseObject, ResponseTool } from "./store.ts";

/** The response object before the model answers: the request's settings, echoed as OpenAI echoes them. */
export function draftResponse(input: CreateResponseInput, id: string, model: string): ResponseObject {
  const tools: ResponseTool[] = (input.tools ?? []).map((t) =>
    t.type === "mcp"
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
    created_at: Math.floor(Date.now() / 1000),
    status: "in_progress",
    background: false,
    completed_at: null,
    error: null,
    incomplete_details: null,
    instructions: input.instructions ?? null,
    max_output_tokens: input.max_output_tokens ?? null,
    max_tool_calls: null,
    model,
    output: [],
    parallel_tool_calls: input.parallel_tool_calls,
    previous_response_id: input.previous_response_id ?? null,
    conversation: input.conversation ? { id: input.conversation } : null,
    reasoning: { effort: input.reasoning?.effort ?? null, summary: null },
    store: input.store,
    temperature: input.temperature ?? null,
    text: { format: input.text?.format ?? { type: "text" }, ...(verbosity ? { verbosity } : {}) },
    tool_choice: input.tool_choice ?? "auto",
    tools,
    top_p: input.top_p ?? null,
    truncation: input.truncation,
    usage: null,
    user: input.user ?? null,
    metadata: input.metadata ?? {},
  };
}

/** Why a response stopped short, from the model's finish reason; `null` when it is complete. */
export function incompleteReason(completion: Completion): ResponseObject["incomplete_details"] {
  if (completion.finishReason === "length") return { reason: "max_output_tokens" };
  if (completion.finishReason === "content_filter") return { reason: "content_filter" };
  return null;
}

/** An output text part as OpenAI sends and stores it. */
export const outputText = (text: string) => ({
  type: "output_text" as const,
  text,
  annotations: [],
  logprobs: [],
});

/** The output items of an answer: its text as a message (unless it only called tools), then its tool calls. */
export function outputOf(completion: Completion): OutputItem[] {
  const status = incompleteReason(completion) ? "incomplete" : "completed";
  const output: OutputItem[] = [];
  if (completion.text || completion.toolCalls.length === 0) {
    output.push({
      type: "message",
      id: newId(ID_PREFIX.message),
      status,
      role: "assistant",
      content: [outputText(completion.text)],
    });
  }
  for (const call of completion.toolCalls) {
    output.push({
      type: "function_call",
      id: newId(ID_PREFIX.function_call),
      status: "completed",
      call_id: call.id,
      name: call.name,
      arguments: call.arguments,
    });
  }
  return output;
}

/** The response once the model has answered with `output`: completed, or incomplete when it was cut short. */
export function settle(response: ResponseObject, completion: Completion, output: OutputItem[]): void {
  const incomplete = incompleteReason(completion);
  response.status = incomplete ? "incomplete" : "completed";
  response.incomplete_details = incomplete;
  response.completed_at = incomplete ? null : Math.floor(Date.now() / 1000);
  response.model = completion.model;
  response.output = output;
  response.usage = {
    input_tokens: completion.usage.input_tokens,
    input_tokens_details: { cached_tokens: completion.usageDetails.cachedTokens },
    output_tokens: completion.usage.output_tokens,
    output_tokens_details: { reasoning_tokens: completion.usageDetails.reasoningTokens },
    total_tokens: completion.usage.total_tokens,
  };
}

/**
 * The response as it failed, for `response.failed`: the error as the
 * catalogue tells it (`responseFailure`: an `AppError`'s fixed message, never
 * a provider's text; anything unexpected gets a generic one).
 */
export function failed(response: ResponseObject, output: OutputItem[], err: unknown): ResponseObject {
  return { ...response, status: "failed", output, error: responseFailure(err, "The response failed") };
}
