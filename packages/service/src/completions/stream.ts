import { randomBytes, randomInt } from "node:crypto";
import { streamErrorChunk } from "@gw/core/errors";
import type { Logger } from "@gw/core/logger";
import { type EventSink, logStreamFailure } from "../calls/event-sink.ts";
import { relayPieces, type StreamedCall } from "../calls/model-call.ts";
import type { ChatProvider, ChatRequest, Completion, StreamSeen } from "../llm/provider.ts";
import { choicesOf, finishReasonOf, usageObject } from "./completion.ts";

export interface StreamedCompletion extends StreamedCall {
  /** Sends the last chunk (its finish reason), the usage chunk if asked for, and `[DONE]`. */
  end(): void;
  /** Ends the stream with an OpenAI error chunk, which the SDKs raise as an error. */
  fail(err: unknown): void;
}

/**
 * Streams one completion as OpenAI's `chat.completion.chunk` events: the
 * assistant's role, its text and tool calls in pieces (a call's id, type and
 * name in its first piece, then fragments of its arguments), then (`end`)
 * the finish reason, the usage when `stream_options.include_usage` asks
 * for it, and `data: [DONE]`.
 *
 * Failures before the first byte throw (ordinary error answers); after it a
 * chunk `{"error": {message, type, param, code}}` ends the stream, carrying
 * only an `AppError`'s message, never a provider's text.
 */
export async function streamCompletion(
  sink: EventSink,
  call: {
    provider: ChatProvider;
    logger: Logger;
    request: ChatRequest;
    id: string;
    created: number;
    includeUsage: boolean;
    /** `stream_options.include_obfuscation`: pad each chunk with an `obfuscation` field. */
    obfuscate?: boolean;
    signal: AbortSignal;
  },
): Promise<StreamedCompletion> {
  const { provider, logger, request, includeUsage, signal } = call;
  if ((request.n ?? 1) > 1) return streamChoices(sink, call);
  const seen: StreamSeen = {};
  const pieces = provider.stream(request, signal, seen);
  const first = await pieces.next(); // provider errors surface here, before any byte is sent
  // OpenAI's rule: every chunk names the model that answers, as the provider names it.
  const model = first.done ? first.value.model : (seen.model ?? request.model);
  const { send, chunk } = chunkWriter(sink, call, model);
  const delta = (d: Record<string, unknown>, finish: string | null = null) =>
    chunk([{ index: 0, delta: d, finish_reason: finish, logprobs: null }]);

  const fail = (err: unknown) => {
    if (signal.aborted) logger.info({ requestId: sink.requestId }, "client closed the request");
    if (signal.aborted || sink.ended) return;
    logStreamFailure(logger, sink, err, "completion");
    send(streamErrorChunk(err, "The completion failed"));
    sink.end();
  };
  const end = (completion: Completion) => () => {
    // The tokens' logprobs come with the last chunk: the SDKs join every chunk's, so the answer has them all.
    const logprobs = completion.logprobs ? { content: completion.logprobs, refusal: null } : null;
    chunk([{ index: 0, delta: {}, finish_reason: finishReasonOf(completion.finishReason), logprobs }]);
    if (includeUsage) chunk([], { usage: usageObject(completion) });
    sink.write("data: [DONE]\n\n");
    sink.end();
  };

  sink.open();
  delta({ role: "assistant", content: "", refusal: null });
  const announced = new Set<number>();
  const relayed = await relayPieces(first, pieces, {
    text: (piece) => delta({ content: piece }),
    toolCall: (piece) => {
      const fresh = !announced.has(piece.index);
      announced.add(piece.index);
      delta({
        tool_calls: [
          fresh
            ? {
                index: piece.index,
                id: piece.id,
                type: "function",
                function: { name: piece.name, arguments: piece.arguments },
              }
            : { index: piece.index, function: { arguments: piece.arguments } },
        ],
      });
    },
  });
  if ("error" in relayed) {
    fail(relayed.error);
    return { partial: relayed.produced, servedBy: seen.servedBy, end: () => undefined, fail };
  }
  return { completion: relayed.completion, end: end(relayed.completion), fail };
}

/**
 * A stream of several answers (`n`): the provider is asked for them whole
 * (a provider's stream of several choices cannot be checked by the output
 * guardrails piece by piece, nor held to the output cap each), then each
 * answer is sent as OpenAI streams it, its chunks carrying its `index`: its
 * role, its text in one piece (with its tokens' logprobs), its tool calls,
 * and (`end`) its finish reason; then the usage chunk if asked, and `[DONE]`.
 */
/** How one completion's chunks are written: every chunk names the completion, its model and, if asked, a null usage. */
function chunkWriter(sink: EventSink, call: Parameters<typeof streamCompletion>[1], model: string) {
  const { id, created, includeUsage } = call;
  const send = (data: unknown) => sink.write(`data: ${JSON.stringify(data)}\n\n`);
  const chunk = (choices: unknown[], extra: Record<string, unknown> = {}) =>
    send({
      id,
      object: "chat.completion.chunk",
      created,
      model,
      service_tier: call.request.serviceTier ?? null,
      choices,
      ...(includeUsage ? { usage: null } : {}),
      ...(call.obfuscate ? { obfuscation: randomBytes(4 + randomInt(12)).toString("base64url") } : {}),
      ...extra,
    });
  return { send, chunk };
}

async function streamChoices(
  sink: EventSink,
  call: Parameters<typeof streamCompletion>[1],
): Promise<StreamedCompletion> {
  const { provider, logger, request, includeUsage, signal } = call;
  const completion = await provider.complete(request, signal); // provider errors: before any byte is sent
  const { send, chunk } = chunkWriter(sink, call, completion.model);
  const choices = choicesOf(completion);
  const fail = (err: unknown) => {
    if (signal.aborted || sink.ended) return;
    logStreamFailure(logger, sink, err, "completion");
    send(streamErrorChunk(err, "The completion failed"));
    sink.end();
  };
  sink.open();
  for (const [index, choice] of choices.entries()) {
    const part = (delta: Record<string, unknown>, logprobs: unknown = null) =>
      chunk([{ index, delta, finish_reason: null, logprobs }]);
    part({ role: "assistant", content: "", refusal: null });
    if (choice.text)
      part({ content: choice.text }, choice.logprobs ? { content: choice.logprobs, refusal: null } : null);
    for (const [at, c] of choice.toolCalls.entries())
      part({
        tool_calls: [
          { index: at, id: c.id, type: "function", function: { name: c.name, arguments: c.arguments } },
        ],
      });
  }
  const end = () => {
    for (const [index, choice] of choices.entries())
      chunk([{ index, delta: {}, finish_reason: finishReasonOf(choice.finishReason), logprobs: null }]);
    if (includeUsage) chunk([], { usage: usageObject(completion) });
    sink.write("data: [DONE]\n\n");
    sink.end();
  };
  return { completion, end, fail };
}
