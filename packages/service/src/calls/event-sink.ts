import { AppError } from "@gw/core/errors";
import type { Logger } from "@gw/core/logger";

/**
 * Where a streamed answer goes: server-sent events to the caller. The domain
 * writes to it; the HTTP layer makes one of Express's response
 * (`http/model-call.ts` `eventSinkOf`), so nothing here knows of HTTP.
 */
export interface EventSink {
  /** Opens the stream (200, the event-stream headers sent at once). */
  open(): void;
  /** Writes one piece of the stream as it is (`data: …\n\n`). */
  write(text: string): void;
  end(): void;
  /** Whether the stream has ended (by `end`, or the caller went away). */
  readonly ended: boolean;
  /** The request's id, for logs. */
  readonly requestId: string;
}

/** Logs a stream that failed after it began: a catalogue error as a warning, anything else as an error. */
export function logStreamFailure(logger: Logger, sink: EventSink, err: unknown, what: string): void {
  if (err instanceof AppError) logger.warn({ requestId: sink.requestId, err }, `${what} stream failed`);
  else logger.error({ requestId: sink.requestId, err }, `${what} stream failed`);
}
