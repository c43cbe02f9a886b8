const UNIT_MS = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 } as const;
const DURATION = /^(\d+(?:\.\d+)?)(ms|s|m|h|d)$/;

/**
 * A duration with its unit, as settings write them (`30d`, `12h`, `90m`,
 * `5s`, `250ms`), in milliseconds; `undefined` if `text` is not one. The one
 * parser of durations: every retention and interval setting goes through it.
 */
export function parseDuration(text: string): number | undefined {
  const match = DURATION.exec(text.trim());
  if (!match) return undefined;
  const ms = Number(match[1]) * UNIT_MS[match[2] as keyof typeof UNIT_MS];
  return Number.isSafeInteger(Math.round(ms)) ? Math.round(ms) : undefined;
}
