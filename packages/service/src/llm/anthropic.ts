import { endSpan, type Span, startClientSpan } from "@gw/core/tracing";
import type { EventSourceMessage } from "eventsource-parser";
import type { Dispatcher } from "undici";
import type { Ids } from "../ids.ts";
import { usageDetailsOf, usageOf } from "./accounting.ts";
import {
  errorStatusOf,
  type MessagesAnswer,
  type MessagesEvent,
  type MessagesUsage,
  mergedUsage,
  messagesBody,
  reportedUsageOf,
  stopReasonOf,
  toolCallOf,
} from "./anthropic-wire.ts";
import type { ChatRequest, Completion, ToolCall, ToolCallDelta } from "./chat.ts";
import { ProviderFailed, redactProviderText } from "./errors.ts";
import { cappedUsage, capWholeOutput, OutputCap } from "./output-cap.ts";
import type { ModelProvider } from "./provider.ts";
import { serverSentEvents } from "./sse.ts";
import {
  callSignal,
  type Endpoint,
  type ProviderResponse,
  post,
  readUpTo,
  textOf,
  within,
} from "./transport.ts";

export interface AnthropicOptions {
  /** Where the Messages API is, up to its version: `https://api.anthropic.com/v1` (calls go to `/messages` under it). */
  baseUrl: string;
  /** Sent as `x-api-key`; none for an endpoint that takes no key (a local proxy). */
  apiKey: string | undefined;
  /** The upstream model id sent instead of the call's model name, when given. */
  model?: string | undefined;
  /** The `anthropic-version` header: default `2023-06-01`. */
  anthropicVersion?: string | undefined;
  /** To the first byte of an answer, and between the reads of a stream. */
  timeoutMs: number;
  /** Largest answer read: a JSON body, or the text of a streamed answer. */
  maxResponseBytes: number;
  /** Largest single event of a stream. */
  maxEventChars: number;
  /** Issues the ids of tool calls the provider sent without one. */
  ids: Ids;
  /** Other values replaced by `[redacted]` in whatever of the provider's text reaches the log (every deployment's key). */
  secrets?: readonly (string | undefined)[] | undefined;
  /** The only dispatcher that may connect to `baseUrl` (an organization's own, checked at each connection); unset: the origin's pool. */
  dispatcher?: Dispatcher | undefined;
  /** The catalogue's deployment it serves, named on each attempt's span. */
  deployment?: { id: string; modelName: string } | undefined;
}

export const ANTHROPIC_VERSION = "2023-06-01";

/**
 * A provider that speaks Anthropic's Messages API, for calls in the
 * service's chat-completions terms (the mapping is in anthropic-wire.ts and
 * docs/api/anthropic.md). It keeps ChatProvider's promises: a deadline to
 * the first byte and between chunks, size limits, the call stops when
 * `signal` aborts and lets go of its connection however it ends, output
 * held to the call's cap, and failures as `ProviderError`s with the key
 * redacted.
 */
export class AnthropicProvider implements ModelProvider {
  private readonly options: AnthropicOptions;
  private readonly endpoint: Endpoint;

  constructor(options: AnthropicOptions) {
    this.options = options;
    this.endpoint = {
      path: "/messages",
      headers: {
        ...(options.apiKey ? { "x-api-key": options.apiKey } : {}),
        "anthropic-version": options.anthropicVersion ?? ANTHROPIC_VERSION,
      },
    };
  }

  async complete(request: ChatRequest, signal: AbortSignal): Promise<Completion> {
    const call = callSignal(signal);
    const model = this.modelOf(request);
    const span = this.span(model, false);
    let failure: unknown;
    try {
      const res = await this.post(messagesBody(request, model), call.signal, span);
      const max = this.options.maxResponseBytes;
      const { text: raw, whole } = await within(readUpTo(res, max), this.options.timeoutMs);
      if (!whole) throw new ProviderFailed(`its answer is over ${max} bytes`, { status: res.status });
      let body: MessagesAnswer;
      try {
        body = JSON.parse(raw);
      } catch {
        throw new ProviderFailed("its answer is not JSON", { status: res.status, detail: this.redact(raw) });
      }
      if (body?.type === "error")
        throw new ProviderFailed("it reported an error", {
          status: errorStatusOf(body.error),
          detail: this.redact(raw),
        });
      if (!Array.isArray(body?.content))
        throw new ProviderFailed("its answer holds no message", {
          status: res.status,
          detail: this.redact(raw),
        });
      let answered = "";
      const toolCalls: ToolCall[] = [];
      for (const block of body.content) {
        if (block?.type === "text" && typeof block.text === "string") answered += block.text;
        const toolCall = block ? toolCallOf(block, () => this.options.ids.newId("call")) : undefined;
        if (toolCall) toolCalls.push(toolCall);
      }
      const reported = reportedUsageOf(body.usage);
      const usageDetails = usageDetailsOf(reported);
      const cap = request.maxOutputTokens;
      const held = await capWholeOutput(model, cap, {
        text: answered,
        toolCalls,
        reported: reported?.completion_tokens,
        reasoning: usageDetails.reasoningTokens,
      });
      const cut = held.overrun > 0;
      return {
        text: held.text,
        toolCalls: held.toolCalls,
        finishReason: cut ? "length" : stopReasonOf(body.stop_reason),
        model: typeof body.model === "string" && body.model ? body.model : model,
        usage: cappedUsage(usageOf(reported, request.messages, answered, toolCalls), cap, cut),
        usageDetails,
        ...(cut ? { overrun: held.overrun } : {}),
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
   * calls as `ToolCallDelta`s (each `tool_use` block is announced, with its
   * id and name, as it opens); returns the completion when the provider is
   * done. `seen.model` is the model that answers, as the provider names it,
   * from `message_start` on.
   */
  async *stream(
    request: ChatRequest,
    signal: AbortSignal,
    seen: { model?: string } = {},
  ): AsyncGenerator<string | ToolCallDelta, Completion> {
    const call = callSignal(signal);
    const requested = this.modelOf(request);
    const span = this.span(requested, true);
    let failure: unknown;
    try {
      const res = await this.post({ ...messagesBody(request, requested), stream: true }, call.signal, span);
      const max = this.options.maxResponseBytes;
      let text = "";
      let bytes = 0;
      let model: string | undefined;
      let usage: MessagesUsage | undefined;
      let stopReason: string | null | undefined;
      let finished = false;
      const calls: ToolCall[] = [];
      /** The position among the tool calls of each open `tool_use` block, by block index. */
      const callAt = new Map<unknown, number>();
      const count = (piece: string) => {
        bytes += Buffer.byteLength(piece);
        if (bytes > max) throw new ProviderFailed(`its answer is over ${max} bytes`);
      };
      // Output past the cap is not relayed, and the provider is not read further: the answer ends there.
      const cap = new OutputCap(requested, request.maxOutputTokens);
      const takeText = async (piece: string): Promise<string> => {
        count(piece);
        const kept = await cap.take(piece);
        text += kept;
        return kept;
      };
      const argumentsOf = async (index: number, whole: string): Promise<ToolCallDelta> => {
        count(whole);
        const fragment = await cap.take(whole);
        const current = calls[index]!;
        current.arguments += fragment;
        return { index, id: current.id, name: current.name, arguments: fragment };
      };
      for await (const message of serverSentEvents(
        textOf(res, this.options.timeoutMs),
        this.options.maxEventChars,
      )) {
        const event = this.eventOf(message);
        if (event.type === "message_start") {
          const name = event.message?.model;
          if (model === undefined && typeof name === "string" && name) seen.model = model = name;
          usage = mergedUsage(usage, event.message?.usage);
        } else if (event.type === "content_block_start") {
          const block = event.content_block;
          const opening = block?.type === "text" && typeof block.text === "string" ? block.text : "";
          if (opening) {
            const kept = await takeText(opening);
            if (kept) yield kept;
            if (cap.cut) break;
          }
          const toolCall = block ? toolCallOf(block, () => this.options.ids.newId("call")) : undefined;
          if (!toolCall) continue;
          if (!toolCall.name) throw new ProviderFailed("it sent a tool call without a name");
          // The input comes in `input_json_delta`s; what the block opens with (`{}`) is not part of it.
          callAt.set(event.index, calls.push({ ...toolCall, arguments: "" }) - 1);
          yield { index: calls.length - 1, id: toolCall.id, name: toolCall.name, arguments: "" };
        } else if (event.type === "content_block_delta") {
          const delta = event.delta;
          if (delta?.type === "text_delta" && typeof delta.text === "string" && delta.text) {
            const kept = await takeText(delta.text);
            if (kept) yield kept;
          } else if (delta?.type === "input_json_delta" && typeof delta.partial_json === "string") {
            const index = callAt.get(event.index);
            if (index === undefined)
              throw new ProviderFailed("it sent a tool call out of order", {
                detail: `block ${event.index}`,
              });
            const piece = await argumentsOf(index, delta.partial_json);
            if (piece.arguments) yield piece;
          }
          if (cap.cut) break;
        } else if (event.type === "content_block_stop") {
          const index = callAt.get(event.index);
          callAt.delete(event.index);
          // A call without input streams none: its arguments are the empty object, as in a JSON answer.
          if (index !== undefined && calls[index]!.arguments === "") {
            yield await argumentsOf(index, "{}");
            if (cap.cut) break;
          }
        } else if (event.type === "message_delta") {
          if (event.delta?.stop_reason) {
            finished = true;
            stopReason = event.delta.stop_reason;
          }
          usage = mergedUsage(usage, event.usage);
        } else if (event.type === "message_stop") {
          finished = true;
          break;
        }
        // `ping`, and event types Anthropic may add, carry nothing to relay.
      }
      if (cap.cut) {
        finished = true;
        stopReason = "max_tokens";
      }
      if (!finished) {
        throw new ProviderFailed("its stream ended before the answer was complete", {
          status: res.status,
          detail: `content-type ${res.headers.get("content-type")}`,
        });
      }
      const reported = reportedUsageOf(usage);
      // Streamed whole in a few large pieces, an answer can pass the cap unseen: the provider's count says so.
      const overrun = cap.overrun || Math.max(0, (reported?.completion_tokens ?? 0) - (cap.cap ?? Infinity));
      return {
        text,
        toolCalls: calls,
        finishReason: stopReasonOf(stopReason),
        model: model ?? requested,
        usage: cappedUsage(usageOf(reported, request.messages, text, calls), cap.cap, cap.cut),
        usageDetails: usageDetailsOf(reported),
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

  /** The model sent: the deployment's own id, else the name the call asked for. */
  private modelOf(request: ChatRequest): string {
    return this.options.model ?? request.model;
  }

  /** The call's span (when tracing is on): the hop to the model provider. */
  private span(model: string, stream: boolean): Span | undefined {
    return startClientSpan("model provider chat", {
      "gen_ai.operation.name": "chat",
      "gen_ai.provider.name": "anthropic",
      "gen_ai.request.model": model,
      ...(this.options.deployment
        ? { "gw.model": this.options.deployment.modelName, "gw.deployment": this.options.deployment.id }
        : {}),
      "gw.stream": stream,
    });
  }

  /** A stream event; an `error` event ends the stream, classed by the status its error type has as an answer. */
  private eventOf(message: EventSourceMessage): MessagesEvent {
    let event: unknown;
    try {
      event = JSON.parse(message.data);
    } catch {
      event = undefined;
    }
    if (message.event === "error" || (event as MessagesEvent | undefined)?.type === "error")
      throw new ProviderFailed("it reported an error during the stream", {
        status: errorStatusOf((event as MessagesEvent | undefined)?.error),
        detail: this.redact(message.data),
      });
    if (typeof event !== "object" || event === null)
      throw new ProviderFailed("it sent a stream event that is not a JSON object", {
        detail: this.redact(message.data),
      });
    return event as MessagesEvent;
  }

  private post(body: Record<string, unknown>, signal: AbortSignal, span?: Span): Promise<ProviderResponse> {
    return post(this.options, body, signal, span, this.endpoint);
  }

  private redact(text: string): string {
    return redactProviderText(text, [this.options.apiKey, ...(this.options.secrets ?? [])]);
  }
}
