import type { BudgetState } from "@gw/core/budget-windows";
import { openAiRateLimitHeaders, policyHeader, rateLimitHeader, secondsUntil } from "@gw/core/http";

/**
 * The rate-limit headers of a budgeted call's answer, from its windows'
 * standing: the IETF `RateLimit`/`RateLimit-Policy` fields for the request
 * windows, OpenAI's `x-ratelimit-*-requests` and `-tokens` (end-user
 * windows named `end-user-<window>`). Route files set them; none for no windows.
 */
export function budgetHeaders(states: readonly BudgetState[]): Record<string, string> {
  const standing = (unit: "requests" | "tokens") =>
    states
      .filter((s) => s.unit === unit)
      .map((s) => ({ ...s, window: s.scope === "key" ? s.window : `end-user-${s.window}` }));
  const requests = standing("requests");
  return {
    ...(requests.length > 0
      ? { "RateLimit-Policy": policyHeader(requests), RateLimit: rateLimitHeader(requests) }
      : {}),
    ...openAiRateLimitHeaders("requests", requests),
    ...openAiRateLimitHeaders("tokens", standing("tokens")),
  };
}

/** `Retry-After`: whole seconds until the refusing window ends. */
export const retryAfter = (refusedBy: BudgetState) => ({
  "Retry-After": String(secondsUntil(refusedBy.resetMs)),
});
