import { randomBytes, randomInt } from "node:crypto";
import type { Logger } from "@gw/core/logger";
import { type EventSink, logStreamFailure } from "../calls/event-sink.ts";
import { relayPieces, type StreamedCall } from "../calls/model-call.ts";
import type { Ids } from "../ids.ts";
import { ID_PREFIX } from "../items/items.ts";
import {
  type ChatProvider,
  type ChatRequest,
  type StreamSeen,
  type TokenLogprob,
  type ToolCallDelta,
  usageOf,
} from "../llm/provider.ts";
import { citationsFor, type FileSearchRun } from "./file-search.ts";
import { failed, incompleteReason, outputText } from "./response.ts";
import type { OutputItem, ResponseObject } from "./store.ts";

export interface StreamedTurn extends StreamedCall {
  /** The output items as they were streamed. */
  output: OutputItem[];
  /** Sends `response.completed` (or `response.incomplete`) with the response as stored, and ends the stream. */
  end(): void;
  /** Ends the stream with `response.failed`. */
  fail(err: unknown): void;
}

/**
 * Streams one turn as OpenAI's Responses events, each with its
 * `sequence_number`: `response.created`, `response.in_progress`, then for
 * each output item `response.output_item.added`, its content
 * (`response.content_part.added`, `response.output_text.delta`…,
 * `response.output_text.done`, `response.content_part.done` for text;
 * `response.function_call_arguments.delta`…, `.done` for a function call) and
 * `response.output_item.done`. The caller sends `response.completed` once the
 * response is stored (`end`, with `response` as the caller settled it).
 *
 * Failures before the first byte throw (ordinary error answers, from the
 * error middleware); after it, `response.failed` ends the stream, carrying
 * only an `AppError`'s message (never a provider's text), and what was
 * produced so far is returned as `partial`.
 */
export async function streamTurn(
  sink: EventSink,
  turn: {
    provider: ChatProvider;
    logger: Logger;
    /** The streamed output items' ids. */
    ids: Ids;
    response: ResponseObject;
    request: ChatRequest;
    signal: AbortSignal;
    /** `stream_options.include_obfuscation`: pad each delta event with an `obfuscation` field. */
    obfuscate?: boolean;
    /** The turn's file search, run before the model call: its item comes first, and the answer cites its files. */
    fileSearch?: FileSearchRun | undefined;
  },
): Promise<StreamedTurn> {
  const { provider, logger, ids, response, request, signal } = turn;
  const seen: StreamSeen = {};
  const pieces = provider.stream(request, signal, seen);
  const first = await pieces.next(); // provider errors surface here, before any byte is sent
  // OpenAI's rule: `model` is the model that answers, as it names itself, in every event.
  response.model = first.done ? first.value.model : (seen.model ?? response.model);
  const maxToolCalls = response.max_tool_calls ?? Number.POSITIVE_INFINITY;
  let sequence = 0;
  const send = (type: string, data: Record<string, unknown>) =>
    sink.write(`event: ${type}\ndata: ${JSON.stringify({ type, sequence_number: sequence++, ...data })}\n\n`);
  const padding = (): Record<string, string> => (turn.obfuscate ? { obfuscation: obfuscation() } : {});

  const output: OutputItem[] = [];
  /** The item being streamed: its position, and for a tool call the index the provider gives it. */
  let open: { item: OutputItem; outputIndex: number; callIndex?: number } | undefined;

  const openItem = (item: OutputItem, callIndex?: number) => {
    close("completed");
    open = { item, outputIndex: output.length, callIndex };
    output.push(item);
    send("response.output_item.added", { output_index: open.outputIndex, item: structuredClone(item) });
    if (item.type === "message") {
      item.content.push(outputText(""));
      send("response.content_part.added", {
        item_id: item.id,
        output_index: open.outputIndex,
        content_index: 0,
        part: outputText(""),
      });
    }
  };
  const close = (status: "completed" | "incomplete", logprobs: TokenLogprob[] = []) => {
    if (!open) return;
    const { item, outputIndex } = open;
    open = undefined;
    const at = { item_id: item.id, output_index: outputIndex };
    if (item.type === "message") {
      const text = item.content[0]?.text ?? "";
      item.status = status;
      const annotations = citationsFor(turn.fileSearch, text);
      for (const [annotation_index, annotation] of annotations.entries())
        send("response.output_text.annotation.added", {
          ...at,
          content_index: 0,
          annotation_index,
          annotation,
        });
      const part = { ...outputText(text, logprobs), annotations };
      item.content = [part];
      send("response.output_text.done", { ...at, content_index: 0, text, logprobs });
      send("response.content_part.done", { ...at, content_index: 0, part });
    } else if (item.type === "function_call") {
      item.status = "completed";
      send("response.function_call_arguments.done", { ...at, name: item.name, arguments: item.arguments });
    }
    send("response.output_item.done", { output_index: outputIndex, item: structuredClone(item) });
  };
  const text = (delta: string) => {
    if (open?.item.type !== "message") {
      openItem({
        type: "message",
        id: ids.newId(ID_PREFIX.message),
        status: "in_progress",
        role: "assistant",
        content: [],
      });
    }
    const item = open!.item as Extract<OutputItem, { type: "message" }>;
    if (!delta) return;
    item.content[0]!.text += delta;
    send("response.output_text.delta", {
      item_id: item.id,
      output_index: open!.outputIndex,
      content_index: 0,
      delta,
      logprobs: [],
      ...padding(),
    });
  };
  const toolCall = (delta: ToolCallDelta) => {
    if (delta.index >= maxToolCalls) return; // past max_tool_calls: not kept
    if (open?.callIndex !== delta.index) {
      openItem(
        {
          type: "function_call",
          id: ids.newId(ID_PREFIX.function_call),
          status: "in_progress",
          call_id: delta.id,
          name: delta.name,
          arguments: "",
        },
        delta.index,
      );
    }
    const item = open!.item as Extract<OutputItem, { type: "function_call" }>;
    if (!delta.arguments) return;
    item.arguments += delta.arguments;
    send("response.function_call_arguments.delta", {
      item_id: item.id,
      output_index: open!.outputIndex,
      delta: delta.arguments,
      ...padding(),
    });
  };

  /** Ends the stream with `response.failed`; `produced`: the model's output before it broke, estimated as usage. */
  const fail = (err: unknown, produced?: string) => {
    if (signal.aborted) logger.info({ requestId: sink.requestId }, "client closed the request");
    if (signal.aborted || sink.ended) return;
    logStreamFailure(logger, sink, err, "response");
    const usage = produced === undefined ? undefined : usageOf(undefined, request.messages, produced);
    send("response.failed", { response: failed(response, output, err, usage) });
    sink.end();
  };
  const end = () => {
    send(response.status === "incomplete" ? "response.incomplete" : "response.completed", { response });
    sink.end();
  };

  sink.open();
  send("response.created", { response });
  send("response.in_progress", { response });
  if (turn.fileSearch) {
    // The search ran before the model was called: its events, in OpenAI's order, before the answer's.
    const { item } = turn.fileSearch;
    const at = { item_id: item.id, output_index: output.length };
    output.push(item);
    send("response.output_item.added", {
      output_index: at.output_index,
      item: { ...item, status: "in_progress", results: null },
    });
    send("response.file_search_call.in_progress", at);
    send("response.file_search_call.searching", at);
    send("response.file_search_call.completed", at);
    send("response.output_item.done", { output_index: at.output_index, item: structuredClone(item) });
  }
  const relayed = await relayPieces(first, pieces, { text, toolCall });
  if ("error" in relayed) {
    fail(relayed.error, relayed.produced);
    return { output, partial: relayed.produced, servedBy: seen.servedBy, end, fail };
  }
  const completion = relayed.completion;
  if (output.length === 0) text(""); // an empty answer is still an (empty) message
  close(incompleteReason(completion) ? "incomplete" : "completed", completion.logprobs);
  // A message closed early (by a tool call after it) gets its logprobs in the stored response.
  const message = output.find((item) => item.type === "message");
  if (message?.type === "message" && completion.logprobs?.length) {
    const text = message.content[0]?.text ?? "";
    message.content = [
      { ...outputText(text, completion.logprobs), annotations: citationsFor(turn.fileSearch, text) },
    ];
  }
  return { completion, output, end, fail };
}

/** Random padding for a delta event, so its size does not tell the length of its text (OpenAI's `obfuscation`). */
function obfuscation(): string {
  return randomBytes(4 + randomInt(12)).toString("base64url");
}
