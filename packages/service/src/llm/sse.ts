import { createParser, type EventSourceMessage } from "eventsource-parser";
import { ProviderFailed } from "./errors.ts";

/**
 * The server-sent events in a stream of text, as they arrive (eventsource-parser:
 * LF, CRLF or CR line ends, multi-line `data:`, comments). An event the stream
 * ends without a blank line after still counts: the SSE spec drops it, but
 * providers that omit the last blank line mean it. An event (or a line) over
 * `maxEventChars` ends the stream with a `ProviderFailed`, so a provider cannot
 * make the buffer grow without bound.
 */
export async function* serverSentEvents(
  text: AsyncIterable<string>,
  maxEventChars: number,
): AsyncGenerator<EventSourceMessage> {
  const ready: EventSourceMessage[] = [];
  let overflow = false;
  const parser = createParser({
    maxBufferSize: maxEventChars,
    onEvent: (event) => ready.push(event),
    onError: (error) => {
      if (error.type === "max-buffer-size-exceeded") overflow = true;
    },
  });
  const feed = function* (chunk: string) {
    parser.feed(chunk);
    yield* ready.splice(0); // the events completed before an overflow still count
    if (overflow) throw new ProviderFailed(`it sent a stream event over ${maxEventChars} characters`);
  };
  for await (const chunk of text) yield* feed(chunk);
  yield* feed("\n\n");
}
