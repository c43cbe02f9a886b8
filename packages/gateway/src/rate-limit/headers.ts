import type { WindowState } from "./quota.ts";

/** `RateLimit-Policy` (IETF draft): every quota of the key, e.g. `"second";q=5;w=1, "day";q=1000;w=86400`. */
export function policyHeader(windows: WindowState[]): string {
  return windows.map((w) => `"${w.window}";q=${w.limit};w=${w.seconds}`).join(", ");
}

/** `RateLimit` (IETF draft): the tightest window, e.g. `"second";r=3;t=1`. */
export function rateLimitHeader(windows: WindowState[]): string {
  const tightest = [...windows].sort((a, b) => a.remaining - b.remaining || a.seconds - b.seconds)[0]!;
  return `"${tightest.window}";r=${tightest.remaining};t=${secondsUntil(tightest.resetMs)}`;
}

/** Whole seconds until a window frees a slot, at least 1 (`Retry-After`). */
export function secondsUntil(ms: number): number {
  return Math.max(1, Math.ceil(ms / 1000));
}
