import { AppError } from "@gw/core/errors";
import { type ChatMessage, type ChatRequest, type FinishReason, type ToolCall, textParts } from "./chat.ts";
import type { ReportedUsage } from "./wire.ts";

/**
 * Anthropic's Messages API as the service speaks it (docs/api/anthropic.md):
 * the request body made from a call in chat-completions terms, and the
 * answers, stream events and usage read back into them. Every field of an
 * answer is optional here: a provider's answer is read defensively.
 */

/** `max_tokens` when the call names no output cap: Anthropic requires one, and most of its models allow this many. */
export const DEFAULT_MAX_TOKENS = 4096;

export type MessagesUsage = {
  input_tokens?: number | null;
  output_tokens?: number | null;
  cache_creation_input_tokens?: number | null;
  cache_read_input_tokens?: number | null;
  output_tokens_details?: { thinking_tokens?: number | null } | null;
};

/** A content block of an answer (whole), or as `content_block_start` opens it. */
export interface MessagesBlock {
  type?: unknown;
  text?: unknown;
  id?: unknown;
  name?: unknown;
  input?: unknown;
}

export interface MessagesAnswer {
  type?: unknown;
  model?: unknown;
  content?: unknown;
  stop_reason?: string | null;
  usage?: MessagesUsage | null;
  error?: { type?: unknown; message?: unknown } | null;
}

/** One event of a stream: its `type` says which of the fields it carries. */
export interface MessagesEvent {
  type?: unknown;
  message?: MessagesAnswer | null;
  index?: unknown;
  content_block?: MessagesBlock | null;
  delta?: { type?: unknown; text?: unknown; partial_json?: unknown; stop_reason?: string | null } | null;
  usage?: MessagesUsage | null;
  error?: { type?: unknown; message?: unknown } | null;
}

type Block = Record<string, unknown>;
type Turn = { role: "user" | "assistant"; content: Block[] };

/** The Messages body of a call to `model`; optional fields only when set (what has no equivalent is left out). */
export function messagesBody(request: ChatRequest, model: string): Record<string, unknown> {
  const { system, messages } = turnsOf(request.messages);
  const tools = request.tools?.length ? request.tools : undefined;
  const schema = jsonSchemaOf(request.responseFormat);
  const userId = request.safetyIdentifier ?? request.user;
  return {
    model,
    max_tokens: request.maxOutputTokens || DEFAULT_MAX_TOKENS,
    ...(system.length ? { system } : {}),
    messages,
    ...(request.temperature !== undefined ? { temperature: request.temperature } : {}),
    ...(request.topP !== undefined ? { top_p: request.topP } : {}),
    ...(request.stop?.length ? { stop_sequences: request.stop } : {}),
    ...(userId !== undefined ? { metadata: { user_id: userId } } : {}),
    ...(schema ? { output_config: { format: { type: "json_schema", schema } } } : {}),
    ...(tools
      ? {
          tools: tools.map((t) => ({
            name: t.name,
            ...(t.description !== undefined ? { description: t.description } : {}),
            // Anthropic requires a schema; a function without parameters takes an empty object.
            input_schema: t.parameters ?? { type: "object", properties: {} },
            ...(t.strict ? { strict: true } : {}),
          })),
          ...toolChoiceOf(request),
        }
      : {}),
  };
}

/**
 * System and developer messages become the top-level `system` (in order);
 * the rest alternate as Anthropic requires: an assistant's tool calls are
 * `tool_use` blocks, `tool` messages `tool_result` blocks of a user turn,
 * and consecutive messages of one role (tool results among them) one turn.
 * Empty text is left out: Anthropic refuses empty text blocks.
 */
function turnsOf(messages: ChatMessage[]): { system: Block[]; messages: Turn[] } {
  const system: Block[] = [];
  const turns: Turn[] = [];
  const add = (role: Turn["role"], blocks: Block[]) => {
    if (blocks.length === 0) return;
    const last = turns.at(-1);
    if (last?.role === role) last.content.push(...blocks);
    else turns.push({ role, content: blocks });
  };
  // One text block, or one for each part the caller gave.
  const text = (message: ChatMessage): Block[] =>
    (textParts(message) ?? [message.content]).filter(Boolean).map((part) => ({ type: "text", text: part }));
  for (const message of messages) {
    switch (message.role) {
      case "system":
      case "developer":
        system.push(...text(message));
        break;
      case "user":
        add("user", text(message));
        break;
      case "tool":
        add("user", [
          {
            type: "tool_result",
            tool_use_id: message.toolCallId ?? "",
            ...(message.content ? { content: message.content } : {}),
          },
        ]);
        break;
      case "assistant":
        add("assistant", [...text(message), ...(message.toolCalls ?? []).map(toolUseOf)]);
        break;
    }
  }
  return { system, messages: turns };
}

/** A tool call as a `tool_use` block: Anthropic takes its input as a JSON object, not as text. */
function toolUseOf(call: ToolCall): Block {
  let input: unknown = {};
  if (call.arguments.trim()) {
    try {
      input = JSON.parse(call.arguments);
    } catch {
      input = undefined;
    }
  }
  if (typeof input !== "object" || input === null || Array.isArray(input))
    throw new AppError(
      "bad_request",
      "A tool call's arguments are not a JSON object, which this model's provider requires",
    );
  return { type: "tool_use", id: call.id, name: call.name, input };
}

/** `tool_choice`, with `parallel_tool_calls: false` as its `disable_parallel_tool_use`. */
function toolChoiceOf(request: ChatRequest): Record<string, unknown> {
  const choice = request.toolChoice;
  const single = request.parallelToolCalls === false ? { disable_parallel_tool_use: true } : {};
  if (choice === "none") return { tool_choice: { type: "none" } };
  if (choice === "required") return { tool_choice: { type: "any", ...single } };
  if (typeof choice === "object") return { tool_choice: { type: "tool", name: choice.name, ...single } };
  if (choice === "auto" || request.parallelToolCalls === false)
    return { tool_choice: { type: "auto", ...single } };
  return {};
}

/** The schema of a chat-completions `response_format` of type `json_schema`, if it is one. */
function jsonSchemaOf(format: Record<string, unknown> | undefined): Record<string, unknown> | undefined {
  if (format?.type !== "json_schema") return undefined;
  const schema = (format.json_schema as { schema?: unknown } | undefined)?.schema;
  return typeof schema === "object" && schema !== null ? (schema as Record<string, unknown>) : undefined;
}

/**
 * Anthropic's counts in chat-completions terms. Its `input_tokens` leaves
 * out what was read from or written to the prompt cache: the input is all
 * three (a cache write is charged as input), and the cache reads are its
 * cached tokens, so a model's prices apply as they do to OpenAI's counts.
 */
export function reportedUsageOf(usage: MessagesUsage | null | undefined): ReportedUsage | undefined {
  if (!usage) return undefined;
  const count = (n: unknown) => (typeof n === "number" && Number.isFinite(n) && n >= 0 ? n : undefined);
  const input = count(usage.input_tokens);
  const read = count(usage.cache_read_input_tokens) ?? 0;
  const written = count(usage.cache_creation_input_tokens) ?? 0;
  const output = count(usage.output_tokens);
  const thinking = count(usage.output_tokens_details?.thinking_tokens);
  return {
    ...(input !== undefined ? { prompt_tokens: input + read + written } : {}),
    ...(output !== undefined ? { completion_tokens: output } : {}),
    prompt_tokens_details: { cached_tokens: read, ...(written > 0 ? { cache_write_tokens: written } : {}) },
    ...(thinking !== undefined ? { completion_tokens_details: { reasoning_tokens: thinking } } : {}),
  };
}

/** A stream's usage so far: the fields a later event (`message_delta`) gives replace those of an earlier one. */
export function mergedUsage(
  earlier: MessagesUsage | null | undefined,
  later: MessagesUsage | null | undefined,
): MessagesUsage | undefined {
  if (!later) return earlier ?? undefined;
  const merged: MessagesUsage = { ...earlier };
  for (const [field, value] of Object.entries(later))
    if (value !== null && value !== undefined) (merged as Record<string, unknown>)[field] = value;
  return merged;
}

/** Why the model stopped, in chat-completions terms. */
export function stopReasonOf(reason: string | null | undefined): FinishReason {
  switch (reason) {
    case "end_turn":
    case "stop_sequence":
      return "stop";
    case "max_tokens":
    case "model_context_window_exceeded":
      return "length";
    case "tool_use":
      return "tool_calls";
    case "refusal":
      return "content_filter";
    default:
      return "unknown";
  }
}

/** The HTTP status Anthropic gives each error type: an error event in a stream is classed as that answer would be. */
const ERROR_STATUS: Record<string, number> = {
  invalid_request_error: 400,
  authentication_error: 401,
  billing_error: 402,
  permission_error: 403,
  not_found_error: 404,
  request_too_large: 413,
  rate_limit_error: 429,
  api_error: 500,
  timeout_error: 504,
  overloaded_error: 529,
};

/** The status of an error object's `type`; an unknown type is a server error. */
export const errorStatusOf = (error: { type?: unknown } | null | undefined): number =>
  (typeof error?.type === "string" && ERROR_STATUS[error.type]) || 500;

/** The tool call of a `tool_use` block, its input as JSON text; `undefined` for any other block. */
export function toolCallOf(block: MessagesBlock, newId: () => string): ToolCall | undefined {
  if (block.type !== "tool_use") return undefined;
  return {
    id: typeof block.id === "string" && block.id ? block.id : newId(),
    name: typeof block.name === "string" ? block.name : "",
    arguments: JSON.stringify(block.input ?? {}),
  };
}
