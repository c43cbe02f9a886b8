import fs from "node:fs";
import { type Logger, pino } from "pino";
import { traceFields, tracingEnabled } from "./tracing.ts";

export type { Logger };

/**
 * Structured JSON logs. Credentials never reach a log line: request headers
 * are not logged at all, and the redaction list is a second line of defence
 * for objects that carry them by accident.
 */
export function createLogger(name: string, level: string, destination?: pino.DestinationStream): Logger {
  const options: pino.LoggerOptions = {
    name,
    level,
    base: { service: name },
    // Milliseconds since the epoch: pino's cheapest timestamp, read as-is by log pipelines.
    timestamp: pino.stdTimeFunctions.epochTime,
    redact: {
      paths: [
        "authorization",
        "*.authorization",
        "headers.authorization",
        "*.headers.authorization",
        "key",
        "secret",
        "*.secret",
        "token",
        "*.token",
        "api_key",
        "*.api_key",
        "apiKey",
        "*.apiKey",
      ],
      censor: "[redacted]",
    },
    // With tracing on, every line written inside a request names its trace and span.
    ...(tracingEnabled() ? { mixin: traceFields } : {}),
  };
  // Without a destination: stdout, written asynchronously so a log line never blocks the event loop
  // (pino flushes what is pending when the process exits).
  return pino(options, destination ?? stdoutDestination());
}

/**
 * Stdout, written asynchronously (sonic-boom), whose flush as the process exits gives up on a broken
 * pipe. sonic-boom's `flushSync`, which pino calls on `exit` while a write is pending, retries a write
 * that fails with anything but EAGAIN forever, sleeping between tries: with the reader of our output
 * gone (`pnpm start`'s runner killed, its pipes closed) every try fails with EPIPE, and the process never
 * ends. A write that fails so now counts as written: no one is left to read it.
 */
function stdoutDestination(): pino.DestinationStream {
  const stream = pino.destination({ dest: 1, sync: false });
  const flushSync = stream.flushSync.bind(stream);
  stream.flushSync = () => {
    const writeSync = fs.writeSync;
    let broken = false;
    fs.writeSync = ((target: number, data: string | NodeJS.ArrayBufferView, ...rest: unknown[]) => {
      const length = typeof data === "string" ? Buffer.byteLength(data) : data.byteLength;
      if (broken) return length;
      try {
        return (writeSync as (...args: unknown[]) => number)(target, data, ...rest);
      } catch (err) {
        const code = (err as NodeJS.ErrnoException).code;
        if (code === "EAGAIN" || code === "EBUSY") throw err;
        broken = true;
        return length;
      }
    }) as typeof fs.writeSync;
    try {
      flushSync();
    } finally {
      fs.writeSync = writeSync;
    }
  };
  return stream;
}

/**
 * A logger for lines whose fields are all known and safe (the per-request
 * access line): it skips the redaction pass, which would otherwise run on
 * every request.
 */
export function unredacted(logger: Logger): Logger {
  return logger.child({}, { redact: [] });
}

/** Credentials in a URL never reach a log line. */
export function redactUrl(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.username) parsed.username = "***";
    if (parsed.password) parsed.password = "***";
    return parsed.toString();
  } catch {
    return "(unparseable URL)";
  }
}
