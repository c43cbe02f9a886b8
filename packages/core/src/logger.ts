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
  return pino(options, destination ?? pino.destination({ dest: 1, sync: false }));
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
