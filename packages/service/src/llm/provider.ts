import type { EventSourceMessage } from "eventsource-parser";
import {
  ProviderFailed,
  ProviderNotConfigured,
  ProviderRateLimited,
  ProviderTimeout,
  redactProviderText,
} from "./errors.ts";
import { serverSentEvents } from "./sse.ts";

/** A chat message as the provider takes it. */
export interface ChatMessage {
  role: "system" | "developer" | "user" | "assistant";
  content: string;
}

/** One call to the model, in chat-completions terms. */
export interface ChatRequest {
  model: string;
  messages: ChatMessage[];
  maxOutputTokens?: number | undefined;
}

export interface Usage {
  input_tokens: number;
  output_tokens: number;
  total_tokens: number;
}

export interface Completion {
  text: string;
  /** The model that actually answered, as the provider names it. */
  model: string;
  usage: Usage;
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

type ReportedUsage = { prompt_tokens?: number; completion_tokens?: number };

interface ChatChunk {
  model?: unknown;
  error?: unknown;
  choices?: { delta?: { content?: string | null }; finish_reason?: string | null }[];
  usage?: ReportedUsage | null;
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
      let body: { model?: unknown; choices?: { message?: { content?: unknown } }[]; usage?: ReportedUsage };
      try {
        body = JSON.parse(raw);
      } catch {
        throw new ProviderFailed("its answer is not JSON", { status: res.status, detail: this.redact(raw) });
      }
      const text = body?.choices?.[0]?.message?.content;
      if (typeof text !== "string")
        throw new ProviderFailed("its answer holds no message", {
          status: res.status,
          detail: this.redact(raw),
        });
      return {
        text,
        model: typeof body.model === "string" ? body.model : request.model,
        usage: usageOf(body.usage, request.messages, text),
      };
    } finally {
      call.abort(); // a no-op once the body was read whole; otherwise the connection goes
    }
  }

  /** Yields text deltas as they come; returns the completion when the provider is done. */
  async *stream(request: ChatRequest, signal: AbortSignal): AsyncGenerator<string, Completion> {
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
      let finished = false;
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
        if (choice?.finish_reason) finished = true;
        const delta = choice?.delta?.content;
        if (typeof delta === "string" && delta) {
          bytes += Buffer.byteLength(delta);
          if (bytes > max) throw new ProviderFailed(`its answer is over ${max} bytes`);
          text += delta;
          yield delta;
        }
      }
      if (!finished) {
        throw new ProviderFailed("its stream ended before the answer was complete", {
          status: res.status,
          detail: `content-type ${res.headers.get("content-type")}`,
        });
      }
      return { text, model, usage: usageOf(reported, request.messages, text) };
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

const chatBody = (request: ChatRequest) => ({
  model: request.model,
  messages: request.messages,
  ...(request.maxOutputTokens ? { max_tokens: request.maxOutputTokens } : {}),
});

/** Characters per token when the provider sends no counts (and for context budgets). */
export const estimateTokens = (chars: number) => Math.ceil(chars / 4);

/** The provider's counts, or an estimate when it sends none. */
export function usageOf(
  reported: ReportedUsage | null | undefined,
  messages: ChatMessage[],
  text: string,
): Usage {
  const input = reported?.prompt_tokens ?? estimateTokens(messages.reduce((n, m) => n + m.content.length, 0));
  const output = reported?.completion_tokens ?? estimateTokens(text.length);
  return { input_tokens: input, output_tokens: output, total_tokens: input + output };
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
