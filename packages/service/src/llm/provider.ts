/** A chat message as the provider takes it. */
export interface ChatMessage {
  role: "system" | "developer" | "user" | "assistant";
  content: string;
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

export type ProviderFailure =
  | { kind: "not_configured"; variable: string }
  | { kind: "timeout" }
  | { kind: "rate_limited"; retryAfter?: string }
  | { kind: "upstream"; status?: number; detail: string };

/** Why the model could not answer. The HTTP layer turns it into 503, 504, 429 or 502. */
export class ProviderError extends Error {
  readonly failure: ProviderFailure;
  constructor(failure: ProviderFailure) {
    super(
      failure.kind === "not_configured"
        ? `No model provider is configured: set ${failure.variable}`
        : failure.kind === "timeout"
          ? "The model provider did not answer in time"
          : failure.kind === "rate_limited"
            ? "The model provider is rate limiting"
            : `The model provider failed: ${failure.detail}`,
    );
    this.name = "ProviderError";
    this.failure = failure;
  }
}

export interface ProviderOptions {
  baseUrl: string | undefined;
  apiKey: string | undefined;
  defaultModel: string | undefined;
  allowedModels: string[] | undefined;
  timeoutMs: number;
}

/**
 * An OpenAI-compatible chat-completions provider. Every call has a deadline
 * (for streams: between chunks), and stops when `signal` aborts, so a client
 * that goes away stops the model's work too.
 */
export class ChatProvider {
  private readonly options: ProviderOptions;

  constructor(options: ProviderOptions) {
    this.options = options;
  }

  /** The model to ask for: `auto` is the configured default; others must be allowed. `undefined` if not allowed. */
  resolveModel(requested: string): string | undefined {
    if (requested === "auto") {
      if (!this.options.defaultModel)
        throw new ProviderError({ kind: "not_configured", variable: "LLM_DEFAULT_MODEL" });
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
    if (!this.options.baseUrl) throw new ProviderError({ kind: "not_configured", variable: "LLM_BASE_URL" });
  }

  async complete(model: string, messages: ChatMessage[], maxTokens: number | undefined, signal: AbortSignal) {
    // Aborted when a deadline passes, so a stalled provider does not keep its connection.
    const local = new AbortController();
    const both = AbortSignal.any([signal, local.signal]);
    const res = await this.post({ model, messages, ...(maxTokens ? { max_tokens: maxTokens } : {}) }, both);
    const body = (await withDeadline(res.json(), this.options.timeoutMs, both, () => local.abort())) as {
      model?: string;
      choices?: { message?: { content?: string | null } }[];
      usage?: { prompt_tokens?: number; completion_tokens?: number };
    };
    const text = body.choices?.[0]?.message?.content;
    if (typeof text !== "string")
      throw new ProviderError({ kind: "upstream", status: res.status, detail: "no message in the answer" });
    return {
      text,
      model: body.model ?? model,
      usage: usageOf(body.usage, messages, text),
    } satisfies Completion;
  }

  /** Yields text deltas as they come; returns the completion when the provider is done. */
  async *stream(
    model: string,
    messages: ChatMessage[],
    maxTokens: number | undefined,
    signal: AbortSignal,
  ): AsyncGenerator<string, Completion> {
    const local = new AbortController();
    const both = AbortSignal.any([signal, local.signal]);
    const res = await this.post(
      {
        model,
        messages,
        stream: true,
        stream_options: { include_usage: true },
        ...(maxTokens ? { max_tokens: maxTokens } : {}),
      },
      both,
    );
    if (!res.body) throw new ProviderError({ kind: "upstream", status: res.status, detail: "empty stream" });
    const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = "";
    let text = "";
    let answeredModel = model;
    let reported: { prompt_tokens?: number; completion_tokens?: number } | undefined;
    try {
      while (true) {
        const { value, done } = await withDeadline(reader.read(), this.options.timeoutMs, both, () =>
          local.abort(),
        );
        if (done) break;
        buffer += value;
        let end = buffer.indexOf("\n\n");
        while (end !== -1) {
          const event = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          end = buffer.indexOf("\n\n");
          const data = event
            .split("\n")
            .filter((l) => l.startsWith("data:"))
            .map((l) => l.slice(5).trim())
            .join("");
          if (!data || data === "[DONE]") continue;
          const chunk = JSON.parse(data) as {
            model?: string;
            choices?: { delta?: { content?: string | null } }[];
            usage?: { prompt_tokens?: number; completion_tokens?: number } | null;
          };
          if (chunk.model) answeredModel = chunk.model;
          if (chunk.usage) reported = chunk.usage;
          const delta = chunk.choices?.[0]?.delta?.content;
          if (delta) {
            text += delta;
            yield delta;
          }
        }
      }
    } finally {
      reader.cancel().catch(() => undefined);
    }
    return { text, model: answeredModel, usage: usageOf(reported, messages, text) };
  }

  private async post(body: Record<string, unknown>, signal: AbortSignal): Promise<Response> {
    this.assertConfigured();
    // The deadline covers the wait for the answer to start; reads after that have their own.
    const timeout = new AbortController();
    const timer = setTimeout(() => timeout.abort(), this.options.timeoutMs);
    let res: Response;
    try {
      res = await fetch(`${this.options.baseUrl}/chat/completions`, {
        method: "POST",
        headers: {
          "content-type": "application/json",
          ...(this.options.apiKey ? { authorization: `Bearer ${this.options.apiKey}` } : {}),
        },
        body: JSON.stringify(body),
        signal: AbortSignal.any([signal, timeout.signal]),
      });
    } catch (err) {
      if (timeout.signal.aborted) throw new ProviderError({ kind: "timeout" });
      if (signal.aborted) throw err;
      throw new ProviderError({ kind: "upstream", detail: (err as Error).message });
    } finally {
      clearTimeout(timer);
    }
    if (res.status === 429) {
      throw new ProviderError({
        kind: "rate_limited",
        ...(res.headers.get("retry-after") ? { retryAfter: res.headers.get("retry-after")! } : {}),
      });
    }
    if (!res.ok) {
      const detail = await withDeadline(res.text(), this.options.timeoutMs, signal, () =>
        res.body?.cancel(),
      ).catch(() => "");
      throw new ProviderError({
        kind: "upstream",
        status: res.status,
        detail: `status ${res.status} ${detail.slice(0, 200)}`,
      });
    }
    return res;
  }
}

/** The provider's counts, or an estimate (about four characters a token) when it sends none. */
export function usageOf(
  reported: { prompt_tokens?: number; completion_tokens?: number } | undefined,
  messages: ChatMessage[],
  text: string,
): Usage {
  const input = reported?.prompt_tokens ?? Math.ceil(messages.reduce((n, m) => n + m.content.length, 0) / 4);
  const output = reported?.completion_tokens ?? Math.ceil(text.length / 4);
  return { input_tokens: input, output_tokens: output, total_tokens: input + output };
}

/**
 * Rejects with a timeout `ProviderError` if `promise` takes longer than `ms`
 * (calling `onTimeout` to let go of the connection), or when `signal` aborts.
 */
function withDeadline<T>(
  promise: Promise<T>,
  ms: number,
  signal: AbortSignal,
  onTimeout: () => void,
): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => {
      reject(new ProviderError({ kind: "timeout" })); // settles first: the abort below would reject otherwise
      onTimeout();
    }, ms);
    const onAbort = () => reject(signal.reason);
    signal.addEventListener("abort", onAbort, { once: true });
    promise.then(
      (v) => {
        clearTimeout(timer);
        signal.removeEventListener("abort", onAbort);
        resolve(v);
      },
      (e) => {
        clearTimeout(timer);
        signal.removeEventListener("abort", onAbort);
        reject(e instanceof Error && e.name === "TimeoutError" ? new ProviderError({ kind: "timeout" }) : e);
      },
    );
  });
}
