import {
  type ChatMessage,
  type ChatRequest,
  type FinishReason,
  type TokenLogprob,
  textParts,
} from "./chat.ts";

/**
 * The chat-completions wire as providers speak it: the request body, and the
 * answers and stream chunks as they may come back. Every field of an answer
 * is optional here: a provider's answer is read defensively, field by field.
 */

export type ReportedUsage = {
  prompt_tokens?: number;
  completion_tokens?: number;
  prompt_tokens_details?: { cached_tokens?: number; cache_write_tokens?: number } | null;
  completion_tokens_details?: { reasoning_tokens?: number } | null;
};

/** A tool call as chat-completions sends it: whole in an answer, in pieces (by `index`) in a stream. */
export interface WireToolCall {
  index?: number;
  id?: string;
  function?: { name?: string; arguments?: string };
}

/** A choice's `logprobs`: its content tokens, each with its log probability. */
export interface WireLogprobs {
  content?: unknown[] | null;
}

export interface ChatChunk {
  model?: unknown;
  error?: unknown;
  choices?: {
    delta?: { content?: string | null; tool_calls?: WireToolCall[] | null };
    finish_reason?: string | null;
    logprobs?: WireLogprobs | null;
  }[];
  usage?: ReportedUsage | null;
}

export interface ChatAnswer {
  model?: unknown;
  choices?: {
    index?: number;
    message?: { content?: unknown; tool_calls?: WireToolCall[] | null };
    finish_reason?: string | null;
    logprobs?: WireLogprobs | null;
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
    ...(request.seed !== undefined ? { seed: request.seed } : {}),
    ...(request.stop?.length ? { stop: request.stop } : {}),
    ...(request.promptCacheKey !== undefined ? { prompt_cache_key: request.promptCacheKey } : {}),
    ...(request.safetyIdentifier !== undefined ? { safety_identifier: request.safetyIdentifier } : {}),
    ...(request.serviceTier !== undefined ? { service_tier: request.serviceTier } : {}),
    ...(request.logprobs
      ? { logprobs: true, ...(request.topLogprobs ? { top_logprobs: request.topLogprobs } : {}) }
      : {}),
    ...(request.n !== undefined && request.n > 1 ? { n: request.n } : {}),
    ...(request.presencePenalty ? { presence_penalty: request.presencePenalty } : {}),
    ...(request.frequencyPenalty ? { frequency_penalty: request.frequencyPenalty } : {}),
    ...(request.logitBias && Object.keys(request.logitBias).length ? { logit_bias: request.logitBias } : {}),
    ...(choice !== undefined
      ? {
          tool_choice:
            typeof choice === "string" ? choice : { type: "function", function: { name: choice.name } },
        }
      : {}),
  };
}

function wireMessage(message: ChatMessage): Record<string, unknown> {
  // Text the caller gave in several parts goes on in those parts, as OpenAI's API takes them.
  const parts = textParts(message)?.map((text) => ({ type: "text", text }));
  if (message.role === "tool")
    return { role: "tool", tool_call_id: message.toolCallId, content: parts ?? message.content };
  if (message.toolCalls?.length) {
    return {
      role: message.role,
      content: parts ?? (message.content || null),
      tool_calls: message.toolCalls.map((c) => ({
        id: c.id,
        type: "function",
        function: { name: c.name, arguments: c.arguments },
      })),
    };
  }
  return { role: message.role, content: parts ?? message.content };
}

const FINISH_REASONS = new Set<FinishReason>(["stop", "length", "tool_calls", "content_filter"]);

export function finishReasonOf(reason: string | null | undefined): FinishReason {
  if (reason === "function_call") return "tool_calls";
  return FINISH_REASONS.has(reason as FinishReason) ? (reason as FinishReason) : "unknown";
}

const isNumber = (v: unknown): v is number => typeof v === "number" && Number.isFinite(v);
const bytesOf = (v: unknown): number[] | null =>
  Array.isArray(v) && v.every((b) => Number.isInteger(b)) ? (v as number[]) : null;

/** The well-formed tokens of a choice's `logprobs.content` (a provider's answer is read defensively). */
export function logprobsOf(logprobs: WireLogprobs | null | undefined): TokenLogprob[] {
  const out: TokenLogprob[] = [];
  for (const raw of Array.isArray(logprobs?.content) ? logprobs.content : []) {
    const t = raw as { token?: unknown; logprob?: unknown; bytes?: unknown; top_logprobs?: unknown };
    if (typeof t?.token !== "string" || !isNumber(t.logprob)) continue;
    const top = Array.isArray(t.top_logprobs) ? t.top_logprobs : [];
    out.push({
      token: t.token,
      logprob: t.logprob,
      bytes: bytesOf(t.bytes),
      top_logprobs: top.flatMap((a: { token?: unknown; logprob?: unknown; bytes?: unknown }) =>
        typeof a?.token === "string" && isNumber(a.logprob)
          ? [{ token: a.token, logprob: a.logprob, bytes: bytesOf(a.bytes) }]
          : [],
      ),
    });
  }
  return out;
}

/** The leading tokens of `logprobs` whose text is within `text` (an answer cut short keeps those of what it kept). */
export function logprobsWithin(logprobs: TokenLogprob[], text: string): TokenLogprob[] {
  let length = 0;
  const kept: TokenLogprob[] = [];
  for (const token of logprobs) {
    length += token.token.length;
    if (length > text.length) break;
    kept.push(token);
  }
  return kept;
}
