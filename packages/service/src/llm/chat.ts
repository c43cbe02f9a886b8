import type { ProviderKind } from "./catalogue.ts";
import type { ModelPrice } from "./prices.ts";
import type { ProviderKeyCaller } from "./provider-keys.ts";

/** The model call in the service's own terms (what routes, budgets and usage see), whatever the wire. */

/** A call of a function tool, as the model made it. */
export interface ToolCall {
  id: string;
  name: string;
  /** JSON text, as the model wrote it. */
  arguments: string;
}

/**
 * A chat message as the provider takes it. An assistant message may carry
 * the tool calls it made (its `content` may then be empty); a `tool` message
 * answers one of them.
 */
export interface ChatMessage {
  role: "system" | "developer" | "user" | "assistant" | "tool";
  /** Its whole text: what guardrails check, tokens count and the service keeps. */
  content: string;
  /**
   * The text parts the caller split `content` into, when there were several: a provider is sent them as
   * parts (`textParts`), as they were given, rather than run together. Whatever changes `content` (a
   * redaction) leaves them stale, and stale parts are never sent.
   */
  parts?: readonly string[] | undefined;
  toolCalls?: ToolCall[] | undefined;
  /** On a `tool` message: the call it answers. */
  toolCallId?: string | undefined;
}

/** A message's text from the parts a caller gave: the whole, and the parts themselves when there are several. */
export function fromTextParts(texts: readonly string[]): Pick<ChatMessage, "content" | "parts"> {
  const content = texts.join("");
  return texts.length > 1 ? { content, parts: texts } : { content };
}

/** The parts to send a provider for `message`, if it has several and they still make up its `content`. */
export function textParts(message: ChatMessage): readonly string[] | undefined {
  return message.parts && message.parts.join("") === message.content ? message.parts : undefined;
}

/** A function the model may call (chat-completions `tools[].function`). */
export interface FunctionTool {
  name: string;
  description?: string | undefined;
  parameters?: Record<string, unknown> | undefined;
  strict?: boolean | undefined;
}

/**
 * Where a call may be routed beyond its model name, as the caller's key
 * allows (`routeOf` in llm/models.ts); adapters never read it.
 */
export interface CallRoute {
  /** The catalogue names tried after `model`, in order, each one the key may use. */
  fallbacks: readonly string[];
  /**
   * Who calls, as the model-call pipeline sets it (calls/model-call.ts): a
   * `byok` deployment is served with its organization's own key for the
   * provider, and the key's first use is audited as theirs. None: `byok`
   * deployments are skipped.
   */
  caller?: ProviderKeyCaller | undefined;
}

/** One call to the model, in chat-completions terms. Every field but `model` and `messages` is optional. */
export interface ChatRequest {
  /** A catalogue name; an adapter is handed the upstream's own model id here. */
  model: string;
  /** Unset: the model's own deployments only, no fallback. */
  route?: CallRoute | undefined;
  messages: ChatMessage[];
  maxOutputTokens?: number | undefined;
  temperature?: number | undefined;
  topP?: number | undefined;
  /** The caller's end-user id, passed on as chat-completions `user`. */
  user?: string | undefined;
  /** Chat-completions `response_format`, e.g. `{type: "json_schema", json_schema: {…}}`. */
  responseFormat?: Record<string, unknown> | undefined;
  verbosity?: "low" | "medium" | "high" | undefined;
  /** Chat-completions `reasoning_effort`, for models that reason. */
  reasoningEffort?: "none" | "minimal" | "low" | "medium" | "high" | "xhigh" | undefined;
  tools?: FunctionTool[] | undefined;
  toolChoice?: "none" | "auto" | "required" | { name: string } | undefined;
  parallelToolCalls?: boolean | undefined;
  /** Passed on as they are: sampling (`seed`, `stop`) and what the provider keys its caching, safety and tier on. */
  seed?: number | undefined;
  stop?: string[] | undefined;
  promptCacheKey?: string | undefined;
  safetyIdentifier?: string | undefined;
  serviceTier?: string | undefined;
  /** Ask for the output tokens' log probabilities (and this many alternatives at each). */
  logprobs?: boolean | undefined;
  topLogprobs?: number | undefined;
  /** What the client's API calls a field of these where it names it otherwise (Responses asks for logprobs in `include`): a refusal names it so. */
  fieldNames?: Partial<Record<ProviderField, string>> | undefined;
  /**
   * Answers asked for (chat-completions `n`); unset: one. Each may be up to
   * `maxOutputTokens` long, so admission reserves, and usage counts, the
   * output of all of them.
   */
  n?: number | undefined;
  /** Sampling penalties and token biases, passed on as they are (`presence_penalty`, `frequency_penalty`, `logit_bias`). */
  presencePenalty?: number | undefined;
  frequencyPenalty?: number | undefined;
  logitBias?: Record<string, number> | undefined;
}

/**
 * The request's fields as the client named them, for the ones a provider
 * kind may be unable to take (llm/fields.ts): a request with one of them set
 * is never sent to a deployment whose provider cannot take it.
 */
export type ProviderField =
  | "n"
  | "presence_penalty"
  | "frequency_penalty"
  | "logit_bias"
  | "logprobs"
  | "top_logprobs";

/** One answer among several (`ChatRequest.n`): its text, tool calls, finish reason and logprobs. */
export interface CompletionChoice {
  text: string;
  toolCalls: ToolCall[];
  finishReason: FinishReason;
  logprobs?: TokenLogprob[] | undefined;
}

/** A token's log probability, as chat completions and Responses both give it. */
export interface TokenLogprob {
  token: string;
  logprob: number;
  bytes: number[] | null;
  top_logprobs: { token: string; logprob: number; bytes: number[] | null }[];
}

export interface Usage {
  input_tokens: number;
  output_tokens: number;
  total_tokens: number;
}

/** Why the model stopped: chat-completions `finish_reason`, or `unknown` when a provider gives none. */
export type FinishReason = "stop" | "length" | "tool_calls" | "content_filter" | "unknown";

/** The deployment that answered a call (the router says so; adapters leave it unset). */
export interface ServedBy {
  /** The catalogue name it serves: the one asked for, or the fallback the call came to. */
  model: string;
  /** Its id (`gpt-4o#1`). */
  deployment: string;
  provider: ProviderKind;
  /** The upstream's own model id. */
  upstreamModel: string;
  /** Its price; undefined: unpriced. */
  price: ModelPrice | undefined;
  /** Served with the calling organization's own key. */
  byok: boolean;
}

export interface Completion {
  text: string;
  /** The function calls the model made, in order (none when it only answered). */
  toolCalls: ToolCall[];
  finishReason: FinishReason;
  /** The model that actually answered, as the provider names it. */
  model: string;
  usage: Usage;
  /**
   * Cached input tokens and reasoning tokens, when the provider reports them; input tokens written to the
   * prompt cache, when it reports those (Anthropic's `cache_creation_input_tokens`).
   */
  usageDetails: { cachedTokens: number; reasoningTokens: number; cacheWriteTokens?: number };
  /** The output text's tokens with their log probabilities, when asked for and the provider gave them. */
  logprobs?: TokenLogprob[] | undefined;
  /**
   * Output tokens the provider produced past `maxOutputTokens` (it ignored
   * the cap it was sent), as far as they were read: the answer was cut at
   * the cap (`finishReason: "length"`) where it could still be, and `usage`
   * counts at most the cap (llm/output-cap.ts).
   */
  overrun?: number | undefined;
  /** The deployment that answered. */
  servedBy?: ServedBy | undefined;
  /**
   * The other answers when the request asked for several (`ChatRequest.n`),
   * in order (the second on); the completion's own text, tool calls, finish
   * reason and logprobs are the first. `usage` counts them all.
   */
  moreChoices?: CompletionChoice[] | undefined;
  /**
   * Answered from the response cache (calls/response-cache.ts): no provider
   * was called, so no provider tokens are charged; `usage` is what the
   * answer cost when the model made it.
   */
  cacheHit?: boolean | undefined;
}

/**
 * A piece of a streamed tool call: the call's id and name (known from its
 * first piece on) and the next fragment of its arguments. Text pieces are
 * plain strings.
 */
export interface ToolCallDelta {
  /** The call's position among the tool calls of this answer. */
  index: number;
  id: string;
  name: string;
  arguments: string;
}
