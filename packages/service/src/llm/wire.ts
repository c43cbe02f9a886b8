import type { ChatMessage, ChatRequest, FinishReason } from "./chat.ts";

/**
 * The chat-completions wire as providers speak it: the request body, and the
 * answers and stream chunks as they may come back. Every field of an answer
 * is optional here: a provider's answer is read defensively, field by field.
 */

export type ReportedUsage = {
  prompt_tokens?: number;
  completion_tokens?: number;
  prompt_tokens_details?: { cached_tokens?: number } | null;
  completion_tokens_details?: { reasoning_tokens?: number } | null;
};

/** A tool call as chat-completions sends it: whole in an answer, in pieces (by `index`) in a stream. */
export interface WireToolCall {
  index?: number;
  id?: string;
  function?: { name?: string; arguments?: string };
}

export interface ChatChunk {
  model?: unknown;
  error?: unknown;
  choices?: {
    delta?: { content?: string | null; tool_calls?: WireToolCall[] | null };
    finish_reason?: string | null;
  }[];
  usage?: ReportedUsage | null;
}

export interface ChatAnswer {
  model?: unknown;
  choices?: {
    message?: { content?: unknown; tool_calls?: WireToolCall[] | null };
    finish_reason?: string | null;
  }[];
  usage?: ReportedUsage;
}

/** The chat-completions body of a request; optional fields only when set. */
export function chatBody(request: ChatRequest): Record<string, unknown> {
  const tools = request.tools?.length ? request.tools : undefined;
  const choice = request.toolChoice;
  return {
    model: request.model,
    messages: request.messages.map(wireMessage),
    ...(request.maxOutputTokens ? { max_tokens: request.maxOutputTokens } : {}),
    ...(request.temperature !== undefined ? { temperature: request.temperature } : {}),
    ...(request.topP !== undefined ? { top_p: request.topP } : {}),
    ...(request.user !== undefined ? { user: request.user } : {}),
    ...(request.responseFormat ? { response_format: request.responseFormat } : {}),
    ...(request.verbosity ? { verbosity: request.verbosity } : {}),
    ...(request.reasoningEffort ? { reasoning_effort: request.reasoningEffort } : {}),
    ...(tools
      ? {
          tools: tools.map((t) => ({
            type: "function",
            function: {
              name: t.name,
              ...(t.description !== undefined ? { description: t.description } : {}),
              ...(t.parameters !== undefined ? { parameters: t.parameters } : {}),
              ...(t.strict !== undefined ? { strict: t.strict } : {}),
            },
          })),
          // Providers refuse parallel_tool_calls without tools.
          ...(request.parallelToolCalls !== undefined
            ? { parallel_tool_calls: request.parallelToolCalls }
            : {}),
        }
      : {}),
    ...(choice !== undefined
      ? {
          tool_choice:
            typeof choice === "string" ? choice : { type: "function", function: { name: choice.name } },
        }
      : {}),
  };
}

function wireMessage(message: ChatMessage): Record<string, unknown> {
  if (message.role === "tool")
    return { role: "tool", tool_call_id: message.toolCallId, content: message.content };
  if (message.toolCalls?.length) {
    return {
      role: message.role,
      content: message.content || null,
      tool_calls: message.toolCalls.map((c) => ({
        id: c.id,
        type: "function",
        function: { name: c.name, arguments: c.arguments },
      })),
    };
  }
  return { role: message.role, content: message.content };
}

const FINISH_REASONS = new Set<FinishReason>(["stop", "length", "tool_calls", "content_filter"]);

export function finishReasonOf(reason: string | null | undefined): FinishReason {
  if (reason === "function_call") return "tool_calls";
  return FINISH_REASONS.has(reason as FinishReason) ? (reason as FinishReason) : "unknown";
}
