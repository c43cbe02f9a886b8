import { Writable } from "node:stream";
import { createLogger, type Logger } from "@gw/core/logger";

/** A logger whose JSON lines land in `lines`, for tests that check what is (or is never) logged. */
export function capturingLogger(level = "info", lines: string[] = []): { logger: Logger; lines: string[] } {
  const sink = new Writable({
    write(chunk, _encoding, done) {
      lines.push(String(chunk));
      done();
    },
  });
  return { logger: createLogger("test", level, sink), lines };
}
