/** One window's standing, as rate-limit headers report it. */
export interface WindowStanding {
  window: string;
  /** The quota of the window. */
  limit: number;
  /** Window length in seconds. */
  seconds: number;
  /** What the window still admits. */
  remaining: number;
  /** Milliseconds until the current window ends. */
  resetMs: number;
}

/** `RateLimit-Policy` (IETF draft): every quota of the key, e.g. `"second";q=5;w=1, "day";q=1000;w=86400`. */
export function policyHeader(windows: WindowStanding[]): string {
  return windows.map((w) => `"${w.window}";q=${w.limit};w=${w.seconds}`).join(", ");
}

/** `RateLimit` (IETF draft): the tightest window, e.g. `"second";r=3;t=1`. */
export function rateLimitHeader(windows: WindowStanding[]): string {
  const tightest = tightestOf(windows);
  return `"${tightest.window}";r=${tightest.remaining};t=${secondsUntil(tightest.resetMs)}`;
}

/** Whole seconds until a window frees a slot, at least 1 (`Retry-After`). */
export function secondsUntil(ms: number): number {
  return Math.max(1, Math.ceil(ms / 1000));
}

/**
 * OpenAI's `x-ratelimit-limit-<unit>`, `x-ratelimit-remaining-<unit>` and
 * `x-ratelimit-reset-<unit>` (`requests` or `tokens`) for the tightest of
 * the windows given: the one with the least left (then the shortest).
 */
export function openAiRateLimitHeaders(
  unit: "requests" | "tokens",
  windows: WindowStanding[],
): Record<string, string> {
  if (windows.length === 0) return {};
  const tightest = tightestOf(windows);
  return {
    [`x-ratelimit-limit-${unit}`]: String(tightest.limit),
    [`x-ratelimit-remaining-${unit}`]: String(Math.max(0, tightest.remaining)),
    [`x-ratelimit-reset-${unit}`]: durationText(tightest.resetMs),
  };
}

function tightestOf(windows: WindowStanding[]): WindowStanding {
  return [...windows].sort((a, b) => a.remaining - b.remaining || a.seconds - b.seconds)[0]!;
}

/** A duration as OpenAI writes it: `20ms`, `1s`, `6m0s`, `1h2m3s`. */
export function durationText(ms: number): string {
  if (ms < 1000) return `${Math.max(0, Math.ceil(ms))}ms`;
  const total = Math.ceil(ms / 1000);
  const h = Math.floor(total / 3600);
  const m = Math.floor((total % 3600) / 60);
  const s = total % 60;
  if (h > 0) return `${h}h${m}m${s}s`;
  if (m > 0) return `${m}m${s}s`;
  return `${s}s`;
}
