/**
 * Drops what is left of an HTTP client's answer body. Destroying an undici
 * body that has not ended emits an `error` (`RequestAbortedError`) on it;
 * with no listener, that error is uncaught and ends the process. Nothing
 * more is wanted from a body being discarded, so its errors are ignored.
 */
export function discard(body: { on(event: "error", listener: () => void): unknown; destroy(): void }): void {
  body.on("error", ignore);
  body.destroy();
}

const ignore = () => undefined;
