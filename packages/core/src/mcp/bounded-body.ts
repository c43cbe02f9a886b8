/**
 * An answer that went past its byte limit: reading stopped there, and what
 * came was dropped. The message names only the limit.
 */
export class AnswerTooLarge extends Error {
  readonly limit: number;

  constructor(limit: number) {
    super(`answered more than ${limit} bytes (MCP_MAX_ANSWER_BYTES)`);
    this.name = "AnswerTooLarge";
    this.limit = limit;
  }
}

/**
 * `body`, counted as it is read: past `maxBytes` it errors with
 * `AnswerTooLarge` and cancels its source (the connection is closed, nothing
 * more comes in), whatever reads it (JSON, an SSE parser, text). Memory holds
 * at most one chunk past the limit. `onTooLarge` is told once.
 */
export function boundedStream(
  body: ReadableStream<Uint8Array>,
  maxBytes: number,
  onTooLarge?: (err: AnswerTooLarge) => void,
): ReadableStream<Uint8Array> {
  let seen = 0;
  return body.pipeThrough(
    new TransformStream<Uint8Array, Uint8Array>({
      transform(chunk, controller) {
        seen += chunk.byteLength;
        if (seen <= maxBytes) return controller.enqueue(chunk);
        const err = new AnswerTooLarge(maxBytes);
        controller.error(err);
        onTooLarge?.(err);
      },
    }),
  );
}

/** `response` with its body bounded by `boundedStream` (status and headers as they were). */
export function boundedResponse(
  response: Response,
  maxBytes: number,
  onTooLarge?: (err: AnswerTooLarge) => void,
): Response {
  if (!response.body) return response;
  return new Response(boundedStream(response.body, maxBytes, onTooLarge), {
    status: response.status,
    statusText: response.statusText,
    headers: response.headers,
  });
}

/**
 * A JSON body read up to `maxBytes`: `AnswerTooLarge` past it (the rest
 * never read), a `SyntaxError` for what is not JSON.
 */
export async function readBoundedJson(response: Response, maxBytes: number): Promise<unknown> {
  if (!response.body) throw new SyntaxError("The answer has no body");
  const chunks: Uint8Array[] = [];
  for await (const chunk of boundedStream(response.body, maxBytes)) chunks.push(chunk);
  return JSON.parse(Buffer.concat(chunks).toString("utf8"));
}
