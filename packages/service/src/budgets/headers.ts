import { openAiRateLimitHeaders, secondsUntil } from "@gw/core/http";
import type { WindowState } from "@gw/core/windows";

/**
 * The rate-limit headers a budgeted call's answer gets from the service:
 * OpenAI's `x-ratelimit-*-tokens` (end-user windows named
 * `end-user-<window>`). The gateway sets the request windows' headers
 * (IETF `RateLimit`/`RateLimit-Policy`, `x-ratelimit-*-requests`). Route
 * files set them; none for no windows.
 */
export function budgetHeaders(states: readonly WindowState[]): Record<string, string> {
  const tokens = states
    .filter((s) => s.unit === "tokens")
    .map((s) => ({ ...s, window: s.scope === "key" ? s.window : `end-user-${s.window}` }));
  return openAiRateLimitHeaders("tokens", tokens);
}

/** `Retry-After`: whole seconds until the refusing window ends. */
export const retryAfter = (refusedBy: WindowState) => ({
  "Retry-After": String(secondsUntil(refusedBy.resetMs)),
});
