import type { Completion, CompletionChoice, FinishReason, ToolCall } from "../llm/provider.ts";
import type { CompletionMessage } from "./request.ts";
import type { ChatCompletionObject, CompletionFinishReason, StoredMessage, WireToolCall } from "./store.ts";

/** Chat completions name no `unknown` finish reason: a provider that gave none stopped. */
export const finishReasonOf = (reason: FinishReason): CompletionFinishReason =>
  reason === "unknown" ? "stop" : reason;

export const wireToolCalls = (calls: ToolCall[]): WireToolCall[] =>
  calls.map((c) => ({ id: c.id, type: "function", function: { name: c.name, arguments: c.arguments } }));

/** Chat completions' usage from the model's counts. */
export function usageObject(completion: Completion): ChatCompletionObject["usage"] {
  return {
    prompt_tokens: completion.usage.input_tokens,
    completion_tokens: completion.usage.output_tokens,
    total_tokens: completion.usage.total_tokens,
    prompt_tokens_details: { cached_tokens: completion.usageDetails.cachedTokens },
    completion_tokens_details: { reasoning_tokens: completion.usageDetails.reasoningTokens },
  };
}

/** OpenAI's `ChatCompletion` for the model's answer. */
export function completionObject(
  id: string,
  created: number,
  completion: Completion,
  metadata: Record<string, string>,
  serviceTier: string | undefined,
): ChatCompletionObject {
  return {
    id,
    object: "chat.completion",
    created,
    model: completion.model,
    choices: choicesOf(completion).map((choice, index) => {
      const toolCalls = wireToolCalls(choice.toolCalls);
      return {
        index,
        message: {
          role: "assistant",
          content: choice.text || toolCalls.length === 0 ? choice.text : null,
          refusal: null,
          annotations: [],
          ...(toolCalls.length ? { tool_calls: toolCalls } : {}),
        },
        finish_reason: finishReasonOf(choice.finishReason),
        logprobs: choice.logprobs ? { content: choice.logprobs, refusal: null } : null,
      };
    }),
    usage: usageObject(completion),
    service_tier: serviceTier ?? null,
    metadata,
  };
}

/** Every answer of a completion, in order: its own, then those of a request for several (`n`). */
export function choicesOf(completion: Completion): CompletionChoice[] {
  const { text, toolCalls, finishReason, logprobs } = completion;
  return [{ text, toolCalls, finishReason, logprobs }, ...(completion.moreChoices ?? [])];
}

const textOf = (c: CompletionMessage["content"]) =>
  c == null ? null : typeof c === "string" ? c : c.map((p) => p.text).join("");

/** The request's messages as stored, each with an id of its own (`<completion id>-<index>`). */
export function storedMessages(id: string, messages: CompletionMessage[]): StoredMessage[] {
  return messages.map((m, index): StoredMessage => {
    const stored: StoredMessage = {
      id: `${id}-${index}`,
      role: m.role,
      content: textOf(m.content),
      content_parts: Array.isArray(m.content)
        ? m.content.map((part) => ({ type: "text", text: part.text }))
        : null,
      refusal: null,
    };
    if ("name" in m && m.name) stored.name = m.name;
    if (m.role === "assistant" && m.tool_calls?.length) stored.tool_calls = m.tool_calls;
    if (m.role === "tool") stored.tool_call_id = m.tool_call_id;
    return stored;
  });
}
