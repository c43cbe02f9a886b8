import { AppError, type Logger } from "@gw/core";
import type { Response } from "express";
import { newId } from "../../conversations/store.ts";
import type { ChatProvider, ChatRequest, Completion } from "../../llm/provider.ts";
import type { ResponseObject } from "../../responses/store.ts";

export interface StreamedTurn {
  /** The model's answer, when it finished. */
  completion?: Completion;
  /** What the model produced before the stream broke. */
  partial?: string;
  /** Sends `response.completed` with the stored response, and ends the stream. */
  end(final: ResponseObject): void;
  /** Ends the stream with an `error` event. */
  fail(err: unknown): void;
}

/**
 * Streams one turn as Responses events: `response.created`,
 * `response.output_text.delta`…, `response.output_text.done`; the caller
 * sends `response.completed` once the response is stored (`end`). Failures
 * before the first byte throw (ordinary error answers, from the error
 * middleware); after it, an `error` event ends the stream, carrying only an
 * `AppError`'s code and message (never a provider's text), and what was
 * produced so far is returned as `partial`.
 */
export async function streamTurn(
  res: Response,
  turn: {
    provider: ChatProvider;
    logger: Logger;
    response: ResponseObject;
    request: ChatRequest;
    signal: AbortSignal;
  },
): Promise<StreamedTurn> {
  const { provider, logger, response, request, signal } = turn;
  const deltas = provider.stream(request, signal);
  const first = await deltas.next(); // provider errors surface here, before any byte is sent
  let sequence = 0;
  const send = (type: string, data: Record<string, unknown>) =>
    res.write(`event: ${type}\ndata: ${JSON.stringify({ type, sequence_number: sequence++, ...data })}\n\n`);
  const fail = (err: unknown) => {
    if (signal.aborted || res.writableEnded) return;
    const known = err instanceof AppError;
    if (known) logger.warn({ requestId: res.req.id, err }, "response stream failed");
    else logger.error({ requestId: res.req.id, err }, "response stream failed");
    send(
      "error",
      known ? { code: err.code, message: err.message } : { code: "internal", message: "The response failed" },
    );
    res.end();
  };
  const end = (final: ResponseObject) => {
    send("response.completed", { response: final });
    res.end();
  };
  res
    .status(200)
    .set({ "Content-Type": "text/event-stream", "Cache-Control": "no-cache", "X-Accel-Buffering": "no" });
  res.flushHeaders();
  const itemId = newId("msg");
  response.output = [
    {
      type: "message",
      id: itemId,
      status: "in_progress",
      role: "assistant",
      content: [{ type: "output_text", text: "", annotations: [] }],
    },
  ];
  send("response.created", { response: { ...response, output: [] } });
  const part = { item_id: itemId, output_index: 0, content_index: 0 };
  let produced = "";
  try {
    let step = first;
    while (!step.done) {
      produced += step.value;
      send("response.output_text.delta", { ...part, delta: step.value });
      step = await deltas.next();
    }
    send("response.output_text.done", { ...part, text: step.value.text });
    return { completion: step.value, end, fail };
  } catch (err) {
    fail(err);
    return { partial: produced, end, fail };
  }
}
