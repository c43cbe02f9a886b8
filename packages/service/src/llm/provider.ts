import type { EventSourceMessage } from "eventsource-parser";
import { newId } from "../ids.ts";
import {
  ProviderFailed,
  ProviderNotConfigured,
  ProviderRateLimited,
  ProviderTimeout,
  redactProviderText,
} from "./errors.ts";
import { serverSentEvents } from "./sse.ts";

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
  content: string;
  toolCalls?: ToolCall[] | undefined;
  /** On a `tool` message: the call it answers. */
  toolCallId?: string | undefined;
}

/** A function the model may call (chat-completions `tools[].function`). */
export interface FunctionTool {
  name: string;
  description?: string | undefined;
  parameters?: Record<string, unknown> | undefined;
  strict?: boolean | undefined;
}

/** One call to the model, in chat-completions terms. Every field but `model` and `messages` is optional. */
export interface ChatRequest {
  model: string;
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
}

export interface Usage {
  input_tokens: number;
  output_tokens: number;
  total_tokens: number;
}

/** Why the model stopped: chat-completions `finish_reason`, or `unknown` when a provider gives none. */
export type FinishReason = "stop" | "length" | "tool_calls" | "content_filter" | "unknown";

export interface Completion {
  text: string;
  /** The function calls the model made, in order (none when it only answered). */
  toolCalls: ToolCall[];
  finishReason: FinishReason;
  /** The model that actually answered, as the provider names it. */
  model: string;
  usage: Usage;
  /** Cached input tokens and reasoning tokens, when the provider reports them. */
  usageDetails: { cachedTokens: number; reasoningTokens: number };
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

export interface ProviderOptions {
  baseUrl: string | undefined;
  apiKey: string | undefined;
  defaultModel: string | undefined;
  allowedModels: string[] | undefined;
  timeoutMs: number;
  /** Largest answer read: a JSON body, or the text of a streamed answer. */
  maxResponseBytes: number;
  /** Largest single event of a stream. */
  maxEventChars: number;
}

/** How much of an error body is read, for the log. */
const ERROR_BODY_BYTES = 4096;

type ReportedUsage = {
  prompt_tokens?: number;
  completion_tokens?: number;
  prompt_tokens_details?: { cached_tokens?: number } | null;
  completion_tokens_details?: { reasoning_tokens?: number } | null;
};

/** A tool call as chat-completions sends it: whole in an answer, in pieces (by `index`) in a stream. */
interface WireToolCall {
  index?: number;
  id?: string;
  function?: { name?: string; arguments?: string };
}

interface ChatChunk {
  model?: unknown;
  error?: unknown;
  choices?: {
    delta?: { content?: string | null; tool_calls?: WireToolCall[] | null };
    finish_reason?: string | null;
  }[];
  usage?: ReportedUsage | null;
}

interface ChatAnswer {
  model?: unknown;
  choices?: {
    message?: { content?: unknown; tool_calls?: WireToolCall[] | null };
    finish_reason?: string | null;
  }[];
  usage?: ReportedUsage;
}

/**
 * An OpenAI-compatible chat-completions provider. Every call has a deadline
 * (for streams: between chunks) and size limits, stops when `signal` aborts
 * (a client that goes away stops the model's work too), and lets go of its
 * connection however it ends. Failures are `ProviderError`s.
 */
export class ChatProvider {
  private readonly options: ProviderOptions;

  constructor(options: ProviderOptions) {
    this.options = options;
  }

  /** The model to ask for: `auto` is the configured default; others must be allowed. `undefined` if not allowed. */
  resolveModel(requested: string): string | undefined {
    if (requested === "auto") {
      if (!this.options.defaultModel) throw new ProviderNotConfigured("LLM_DEFAULT_MODEL");
      return this.options.defaultModel;
    }
    const allowed = this.options.allowedModels;
    return !allowed || allowed.includes(requested) ? requested : undefined;
  }

  get allowedModels(): string[] | undefined {
    return this.options.allowedModels;
  }

  /** `LLM_DEFAULT_MODEL`, the model of `auto`. */
  get defaultModel(): string | undefined {
    return this.options.defaultModel;
  }

  /** Fails fast, before any state is created, when no provider is configured. */
  assertConfigured(): void {
    if (!this.options.baseUrl) throw new ProviderNotConfigured("LLM_BASE_URL");
  }

  async complete(request: ChatRequest, signal: AbortSignal): Promise<Completion> {
    const call = new AbortController();
    try {
      const res = await this.post(chatBody(request), AbortSignal.any([signal, call.signal]));
      const max = this.options.maxResponseBytes;
      const { text: raw, whole } = await within(readUpTo(res, max), this.options.timeoutMs);
      if (!whole) throw new ProviderFailed(`its answer is over ${max} bytes`, { status: res.status });
      let body: ChatAnswer;
      try {
        body = JSON.parse(raw);
      } catch {
        throw new ProviderFailed("its answer is not JSON", { status: res.status, detail: this.redact(raw) });
      }
      const choice = body?.choices?.[0];
      const content = choice?.message?.content;
      const toolCalls = (choice?.message?.tool_calls ?? []).map((c) => ({
        id: c.id || newId("call"),
        name: c.function?.name ?? "",
        arguments: c.function?.arguments ?? "",
      }));
      const text = typeof content === "string" ? content : "";
      if (typeof content !== "string" && (content != null || toolCalls.length === 0))
        throw new ProviderFailed("its answer holds no message", {
          status: res.status,
          detail: this.redact(raw),
        });
      return {
        text,
        toolCalls,
        finishReason: finishReasonOf(choice?.finish_reason),
        model: typeof body.model === "string" ? body.model : request.model,
        usage: usageOf(body.usage, request.messages, text, toolCalls),
        usageDetails: usageDetailsOf(body.usage),
      };
    } finally {
      call.abort(); // a no-op once the body was read whole; otherwise the connection goes
    }
  }

  /**
   * Yields the answer as it comes: text pieces as strings, pieces of tool
   * calls as `ToolCallDelta`s (a call's first piece is held back until its
   * name is known); returns the completion when the provider is done.
   */
  async *stream(
    request: ChatRequest,
    signal: AbortSignal,
  ): AsyncGenerator<string | ToolCallDelta, Completion> {
    const call = new AbortController();
    try {
      const res = await this.post(
        { ...chatBody(request), stream: true, stream_options: { include_usage: true } },
        AbortSignal.any([signal, call.signal]),
      );
      const max = this.options.maxResponseBytes;
      let text = "";
      let bytes = 0;
      let model = request.model;
      let reported: ReportedUsage | undefined;
      let finishReason: string | undefined;
      let finished = false;
      const calls: (ToolCall & { announced: boolean })[] = [];
      const count = (piece: string) => {
        bytes += Buffer.byteLength(piece);
        if (bytes > max) throw new ProviderFailed(`its answer is over ${max} bytes`);
      };
      for await (const event of serverSentEvents(this.textOf(res), this.options.maxEventChars)) {
        if (event.data === "[DONE]") {
          finished = true;
          break;
        }
        if (!event.data) continue;
        const chunk = this.chunkOf(event);
        if (typeof chunk.model === "string") model = chunk.model;
        if (chunk.usage) reported = chunk.usage;
        const choice = chunk.choices?.[0];
        if (choice?.finish_reason) {
          finished = true;
          finishReason = choice.finish_reason;
        }
        const delta = choice?.delta?.content;
        if (typeof delta === "string" && delta) {
          count(delta);
          text += delta;
          yield delta;
        }
        for (const piece of choice?.delta?.tool_calls ?? []) {
          const index = piece.index ?? Math.max(calls.length - 1, 0);
          if (index < 0 || index > calls.length)
            throw new ProviderFailed("it sent a tool call out of order", { detail: `index ${index}` });
          if (index === calls.length) calls.push({ id: "", name: "", arguments: "", announced: false });
          const current = calls[index]!;
          current.id ||= piece.id ?? "";
          current.name ||= piece.function?.name ?? "";
          const fragment = piece.function?.arguments ?? "";
          count(fragment);
          current.arguments += fragment;
          if (!current.name) continue;
          current.id ||= newId("call");
          // The first piece announced carries what was held back until the name was known.
          const pending = current.announced ? fragment : current.arguments;
          current.announced = true;
          yield { index, id: current.id, name: current.name, arguments: pending };
        }
      }
      if (!finished) {
        throw new ProviderFailed("its stream ended before the answer was complete", {
          status: res.status,
          detail: `content-type ${res.headers.get("content-type")}`,
        });
      }
      if (calls.some((c) => !c.name)) throw new ProviderFailed("it sent a tool call without a name");
      const toolCalls = calls.map(({ id, name, arguments: args }) => ({ id, name, arguments: args }));
      return {
        text,
        toolCalls,
        finishReason: finishReasonOf(finishReason),
        model,
        usage: usageOf(reported, request.messages, text, toolCalls),
        usageDetails: usageDetailsOf(reported),
      };
    } finally {
      call.abort();
    }
  }

  /** A stream chunk; an `error` event or an OpenAI-style `{"error": …}` chunk ends the stream. */
  private chunkOf(event: EventSourceMessage): ChatChunk {
    const failed = (detail: string) =>
      new ProviderFailed("it reported an error during the stream", { detail: this.redact(detail) });
    if (event.event === "error") throw failed(event.data);
    let chunk: unknown;
    try {
      chunk = JSON.parse(event.data);
    } catch {
      chunk = undefined;
    }
    if (typeof chunk !== "object" || chunk === null)
      throw new ProviderFailed("it sent a stream event that is not a JSON object", {
        detail: this.redact(event.data),
      });
    if ("error" in chunk && chunk.error) throw failed(JSON.stringify(chunk.error));
    return chunk as ChatChunk;
  }

  /** The body as text, each read within the deadline. */
  private async *textOf(res: Response): AsyncGenerator<string> {
    if (!res.body) return;
    const reader = res.body.getReader();
    const decoder = new TextDecoder();
    while (true) {
      const { value, done } = await within(reader.read(), this.options.timeoutMs);
      if (done) break;
      yield decoder.decode(value, { stream: true });
    }
    yield decoder.decode();
  }

  /** Sends the request; the deadline covers the wait for the answer to start. Non-2xx answers throw. */
  private async post(body: Record<string, unknown>, signal: AbortSignal): Promise<Response> {
    this.assertConfigured();
    let res: Response;
    try {
      res = await within(
        fetch(`${this.options.baseUrl}/chat/completions`, {
          method: "POST",
          headers: {
            "content-type": "application/json",
            ...(this.options.apiKey ? { authorization: `Bearer ${this.options.apiKey}` } : {}),
          },
          body: JSON.stringify(body),
          signal,
        }),
        this.options.timeoutMs,
      );
    } catch (err) {
      if (err instanceof ProviderTimeout || signal.aborted) throw err;
      const cause = (err as { cause?: { code?: string; message?: string } }).cause;
      throw new ProviderFailed("it could not be reached", {
        detail: this.redact(cause?.code ?? cause?.message ?? String(err)),
      });
    }
    if (res.ok) return res;
    const { text } = await within(readUpTo(res, ERROR_BODY_BYTES), this.options.timeoutMs).catch(() => ({
      text: "",
    }));
    if (res.status === 429) throw new ProviderRateLimited(res.headers.get("retry-after"), this.redact(text));
    throw new ProviderFailed(`it answered HTTP ${res.status}`, {
      status: res.status,
      detail: this.redact(text),
    });
  }

  private redact(text: string): string {
    return redactProviderText(text, [this.options.apiKey]);
  }
}

/** The chat-completions body of a request; optional fields only when set. */
function chatBody(request: ChatRequest): Record<string, unknown> {
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

function finishReasonOf(reason: string | null | undefined): FinishReason {
  if (reason === "function_call") return "tool_calls";
  return FINISH_REASONS.has(reason as FinishReason) ? (reason as FinishReason) : "unknown";
}

/** Characters per token when the provider sends no counts (and for context budgets). */
export const estimateTokens = (chars: number) => Math.ceil(chars / 4);

/** Characters of a message as context budgets and estimates count them. */
export const charsOf = (message: ChatMessage) =>
  message.content.length +
  (message.toolCalls ?? []).reduce((n, c) => n + c.name.length + c.arguments.length, 0);

/** The provider's counts, or an estimate when it sends none. */
export function usageOf(
  reported: ReportedUsage | null | undefined,
  messages: ChatMessage[],
  text: string,
  toolCalls: ToolCall[] = [],
): Usage {
  const input = reported?.prompt_tokens ?? estimateTokens(messages.reduce((n, m) => n + charsOf(m), 0));
  const output =
    reported?.completion_tokens ?? estimateTokens(charsOf({ role: "assistant", content: text, toolCalls }));
  return { input_tokens: input, output_tokens: output, total_tokens: input + output };
}

function usageDetailsOf(reported: ReportedUsage | null | undefined): Completion["usageDetails"] {
  return {
    cachedTokens: reported?.prompt_tokens_details?.cached_tokens ?? 0,
    reasoningTokens: reported?.completion_tokens_details?.reasoning_tokens ?? 0,
  };
}

/**
 * At most `maxBytes` of a body, as text; `whole` tells whether that was all
 * of it. A declared length over the limit is not read at all.
 */
async function readUpTo(res: Response, maxBytes: number): Promise<{ text: string; whole: boolean }> {
  if (!res.body) return { text: "", whole: true };
  if (Number(res.headers.get("content-length")) > maxBytes) return { text: "", whole: false };
  const reader = res.body.getReader();
  const parts: Uint8Array[] = [];
  let size = 0;
  for (let r = await reader.read(); !r.done; r = await reader.read()) {
    parts.push(r.value);
    size += r.value.byteLength;
    if (size > maxBytes) return { text: Buffer.concat(parts).toString("utf8", 0, maxBytes), whole: false };
  }
  return { text: Buffer.concat(parts).toString("utf8"), whole: true };
}

/** `promise`, or a `ProviderTimeout` once `ms` have passed (the caller then lets go of the connection). */
function within<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new ProviderTimeout()), ms);
  });
  return Promise.race([promise, deadline]).finally(() => clearTimeout(timer));
}
