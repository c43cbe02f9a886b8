import { endSpan, type Span, startClientSpan } from "@gw/core/tracing";
import type { EventSourceMessage } from "eventsource-parser";
import { usageDetailsOf, usageOf } from "./accounting.ts";
import type { Deployment } from "./catalogue.ts";
import type { ChatRequest, Completion, TokenLogprob, ToolCall, ToolCallDelta } from "./chat.ts";
import { type EmbeddingRequest, type Embeddings, embeddingsOf } from "./embeddings.ts";
import { ProviderFailed, redactProviderText } from "./errors.ts";
import { cappedUsage, capWholeOutput, OutputCap } from "./output-cap.ts";
import type { AdapterOptions, ModelProvider } from "./provider.ts";
import { serverSentEvents } from "./sse.ts";
import {
  callSignal,
  chatCompletions,
  type Endpoint,
  embeddingsEndpoint,
  type ProviderResponse,
  post,
  readUpTo,
  textOf,
  within,
} from "./transport.ts";
import {
  type ChatAnswer,
  type ChatChunk,
  chatBody,
  finishReasonOf,
  logprobsOf,
  logprobsWithin,
  type ReportedUsage,
} from "./wire.ts";

/**
 * The adapter of an OpenAI-compatible chat-completions API (OpenAI, vLLM,
 * Ollama, …) for one deployment: `POST {base_url}/chat/completions` with its
 * key as a bearer token. Every call has a deadline (the deployment's
 * `timeout_ms`; for streams, between chunks too) and size limits, stops
 * when `signal` aborts (a client that goes away stops the model's work
 * too), and lets go of its connection however it ends. Failures are
 * `ProviderError`s. `request.model` is the upstream's own model id.
 */
export class OpenAIProvider implements ModelProvider {
  protected readonly deployment: Deployment;
  private readonly options: AdapterOptions;

  constructor(deployment: Deployment, options: AdapterOptions) {
    this.deployment = deployment;
    this.options = options;
  }

  /** Where a call goes under the deployment's base URL, and the headers that carry its key. */
  protected endpoint(_request: ChatRequest): Endpoint {
    return chatCompletions(this.deployment.apiKey);
  }

  /** Where an embeddings call goes under the deployment's base URL, and the headers that carry its key. */
  protected embeddingsEndpoint(_request: EmbeddingRequest): Endpoint {
    return embeddingsEndpoint(this.deployment.apiKey);
  }

  /**
   * `POST {base_url}/embeddings`, asking for base64 (a quarter of the bytes
   * of floats written out; a provider that sends floats anyway is read too),
   * the answer read whole within `maxEmbeddingsResponseBytes` and checked
   * (llm/embeddings.ts).
   */
  async embed(request: EmbeddingRequest, signal: AbortSignal): Promise<Embeddings> {
    const call = callSignal(signal);
    const span = startClientSpan("model provider embeddings", {
      "gen_ai.operation.name": "embeddings",
      "gen_ai.provider.name": this.providerName(),
      "gen_ai.request.model": request.model,
      "gw.model": this.deployment.modelName,
      "gw.deployment": this.deployment.id,
    });
    let failure: unknown;
    try {
      const body = {
        model: request.model,
        input: request.input,
        encoding_format: "base64",
        ...(request.dimensions !== undefined ? { dimensions: request.dimensions } : {}),
        ...(request.user !== undefined ? { user: request.user } : {}),
      };
      const { baseUrl, apiKey, timeoutMs } = this.deployment;
      const { secrets, dispatcher } = this.options;
      const res = await post(
        { baseUrl, apiKey, timeoutMs, secrets, dispatcher },
        body,
        call.signal,
        span,
        this.embeddingsEndpoint(request),
      );
      const max = this.options.maxEmbeddingsResponseBytes ?? this.options.maxResponseBytes;
      const { text: raw, whole } = await within(readUpTo(res, max), timeoutMs);
      if (!whole) throw new ProviderFailed(`its answer is over ${max} bytes`, { status: res.status });
      let answer: unknown;
      try {
        answer = JSON.parse(raw);
      } catch {
        throw new ProviderFailed("its answer is not JSON", { status: res.status, detail: this.redact(raw) });
      }
      return embeddingsOf(answer, request);
    } catch (err) {
      failure = err;
      throw err;
    } finally {
      call.over();
      endSpan(span, failure);
    }
  }

  async complete(request: ChatRequest, signal: AbortSignal): Promise<Completion> {
    const call = callSignal(signal);
    const span = this.span(request, false);
    let failure: unknown;
    try {
      const res = await this.post(request, chatBody(request), call.signal, span);
      const max = this.options.maxResponseBytes;
      const { text: raw, whole } = await within(readUpTo(res, max), this.deployment.timeoutMs);
      if (!whole) throw new ProviderFailed(`its answer is over ${max} bytes`, { status: res.status });
      let body: ChatAnswer;
      try {
        body = JSON.parse(raw);
      } catch {
        throw new ProviderFailed("its answer is not JSON", { status: res.status, detail: this.redact(raw) });
      }
      const usageDetails = usageDetailsOf(body.usage);
      const cap = request.maxOutputTokens;
      const asked = Math.max(1, request.n ?? 1);
      // Several answers: the provider counts their tokens together. Within the cap of them all, none is cut
      // (the budget is held to what was reserved); past it, each is held to the cap by the service's count.
      const total = body.usage?.completion_tokens;
      const reported =
        asked === 1
          ? total
          : total !== undefined && cap !== undefined && total <= cap * asked
            ? 0
            : undefined;
      const wire = [...(Array.isArray(body?.choices) ? body.choices : [])]
        .sort((a, b) => (a?.index ?? 0) - (b?.index ?? 0))
        .slice(0, asked);
      if (wire.length === 0) wire.push({});
      const choices = [];
      let overrun = 0;
      for (const choice of wire) {
        const content = choice?.message?.content;
        const toolCalls = (choice?.message?.tool_calls ?? []).map((c) => ({
          id: c.id || this.options.ids.newId("call"),
          name: c.function?.name ?? "",
          arguments: c.function?.arguments ?? "",
        }));
        const answered = typeof content === "string" ? content : "";
        if (typeof content !== "string" && (content != null || toolCalls.length === 0))
          throw new ProviderFailed("its answer holds no message", {
            status: res.status,
            detail: this.redact(raw),
          });
        const held = await capWholeOutput(request.model, cap, {
          text: answered,
          toolCalls,
          reported,
          reasoning: asked > 1 ? 0 : usageDetails.reasoningTokens,
        });
        const cut = held.overrun > 0;
        overrun += held.overrun;
        const logprobs = request.logprobs ? logprobsOf(choice?.logprobs) : undefined;
        choices.push({
          text: held.text,
          toolCalls: held.toolCalls,
          finishReason: cut ? ("length" as const) : finishReasonOf(choice?.finish_reason),
          answered,
          cut,
          ...(logprobs ? { logprobs: cut ? logprobsWithin(logprobs, held.text) : logprobs } : {}),
        });
      }
      const [first, ...more] = choices.map(({ answered: _, cut: __, ...choice }) => choice);
      const said = choices.map((c) => c.answered).join("");
      const calls = choices.flatMap((c) => c.toolCalls);
      const usage = usageOf(body.usage, request.messages, said, calls);
      return {
        ...first!,
        model: typeof body.model === "string" && body.model ? body.model : request.model,
        // One answer cut counts the whole cap; several count at most the cap each.
        usage:
          asked > 1
            ? cappedUsage(usage, cap === undefined ? undefined : cap * asked, false)
            : cappedUsage(usage, cap, choices[0]!.cut),
        usageDetails,
        ...(more.length ? { moreChoices: more } : {}),
        ...(overrun > 0 ? { overrun } : {}),
      };
    } catch (err) {
      failure = err;
      throw err;
    } finally {
      call.over(); // a no-op once the body was read whole; otherwise the connection goes
      endSpan(span, failure);
    }
  }

  /**
   * Yields the answer as it comes: text pieces as strings, pieces of tool
   * calls as `ToolCallDelta`s (a call's first piece is held back until its
   * name is known); returns the completion when the provider is done.
   * `seen.model` is the model that answers, as the provider names it, from
   * its first chunk on (so a stream can name it before the first piece).
   */
  async *stream(
    request: ChatRequest,
    signal: AbortSignal,
    seen: { model?: string } = {},
  ): AsyncGenerator<string | ToolCallDelta, Completion> {
    const call = callSignal(signal);
    const span = this.span(request, true);
    let failure: unknown;
    try {
      const res = await this.post(
        request,
        { ...chatBody(request), stream: true, stream_options: { include_usage: true } },
        call.signal,
        span,
      );
      const max = this.options.maxResponseBytes;
      let text = "";
      let bytes = 0;
      let model: string | undefined;
      const logprobs: TokenLogprob[] = [];
      let reported: ReportedUsage | undefined;
      let finishReason: string | undefined;
      let finished = false;
      const calls: (ToolCall & { announced: boolean })[] = [];
      const count = (piece: string) => {
        bytes += Buffer.byteLength(piece);
        if (bytes > max) throw new ProviderFailed(`its answer is over ${max} bytes`);
      };
      // Output past the cap is not relayed, and the provider is not read further: the answer ends there.
      const cap = new OutputCap(request.model, request.maxOutputTokens);
      events: for await (const event of serverSentEvents(
        textOf(res, this.deployment.timeoutMs),
        this.options.maxEventChars,
      )) {
        if (event.data === "[DONE]") {
          finished = true;
          break;
        }
        if (!event.data) continue;
        const chunk = this.chunkOf(event);
        // The first name the provider gives is the answer's, for every chunk and the end.
        if (model === undefined && typeof chunk.model === "string" && chunk.model)
          seen.model = model = chunk.model;
        if (chunk.usage) reported = chunk.usage;
        const choice = chunk.choices?.[0];
        if (request.logprobs) logprobs.push(...logprobsOf(choice?.logprobs));
        if (choice?.finish_reason) {
          finished = true;
          finishReason = choice.finish_reason;
        }
        const delta = choice?.delta?.content;
        if (typeof delta === "string" && delta) {
          count(delta);
          const kept = await cap.take(delta);
          text += kept;
          if (kept) yield kept;
          if (cap.cut) break;
        }
        for (const piece of choice?.delta?.tool_calls ?? []) {
          const index = piece.index ?? Math.max(calls.length - 1, 0);
          if (index < 0 || index > calls.length)
            throw new ProviderFailed("it sent a tool call out of order", { detail: `index ${index}` });
          if (index === calls.length) calls.push({ id: "", name: "", arguments: "", announced: false });
          const current = calls[index]!;
          current.id ||= piece.id ?? "";
          current.name ||= piece.function?.name ?? "";
          const whole = piece.function?.arguments ?? "";
          count(whole);
          const fragment = await cap.take(whole);
          current.arguments += fragment;
          if (current.name) {
            current.id ||= this.options.ids.newId("call");
            // The first piece announced carries what was held back until the name was known.
            const pending = current.announced ? fragment : current.arguments;
            current.announced = true;
            yield { index, id: current.id, name: current.name, arguments: pending };
          }
          if (cap.cut) break events;
        }
      }
      if (cap.cut) {
        finished = true;
        finishReason = "length";
      }
      if (!finished) {
        throw new ProviderFailed("its stream ended before the answer was complete", {
          status: res.status,
          detail: `content-type ${res.headers.get("content-type")}`,
        });
      }
      // A call cut before its name came was never relayed: it is no call.
      if (!cap.cut && calls.some((c) => !c.name))
        throw new ProviderFailed("it sent a tool call without a name");
      const toolCalls = calls
        .filter((c) => c.name)
        .map(({ id, name, arguments: args }) => ({ id, name, arguments: args }));
      // Streamed whole in a few large pieces, an answer can pass the cap unseen: the provider's count says so.
      const overrun = cap.overrun || Math.max(0, (reported?.completion_tokens ?? 0) - (cap.cap ?? Infinity));
      return {
        text,
        toolCalls,
        finishReason: finishReasonOf(finishReason),
        model: model ?? request.model,
        usage: cappedUsage(usageOf(reported, request.messages, text, toolCalls), cap.cap, cap.cut),
        usageDetails: usageDetailsOf(reported),
        ...(request.logprobs ? { logprobs: cap.cut ? logprobsWithin(logprobs, text) : logprobs } : {}),
        ...(overrun > 0 ? { overrun } : {}),
      };
    } catch (err) {
      failure = err;
      throw err;
    } finally {
      call.over();
      endSpan(span, failure);
    }
  }

  /** The call's span (when tracing is on): the hop to the model provider, one per attempt. */
  private span(request: ChatRequest, stream: boolean): Span | undefined {
    return startClientSpan("model provider chat", {
      "gen_ai.operation.name": "chat",
      "gen_ai.provider.name": this.providerName(),
      "gen_ai.request.model": request.model,
      "gw.model": this.deployment.modelName,
      "gw.deployment": this.deployment.id,
      "gw.stream": stream,
    });
  }

  /** The provider as OpenTelemetry's GenAI conventions name it. */
  private providerName(): string {
    return this.deployment.provider === "azure" ? "azure.ai.openai" : this.deployment.provider;
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

  /** Sends the request (see `post`). */
  private post(
    request: ChatRequest,
    body: Record<string, unknown>,
    signal: AbortSignal,
    span?: Span,
  ): Promise<ProviderResponse> {
    const { baseUrl, apiKey, timeoutMs } = this.deployment;
    const { secrets, dispatcher } = this.options;
    return post(
      { baseUrl, apiKey, timeoutMs, secrets, dispatcher },
      body,
      signal,
      span,
      this.endpoint(request),
    );
  }

  private redact(text: string): string {
    return redactProviderText(text, this.secrets());
  }

  /** Its own key (an organization's, for a `byok` deployment) and every other deployment's. */
  private secrets(): readonly (string | undefined)[] {
    return [this.deployment.apiKey, ...(this.options.secrets ?? [])];
  }
}
