/** The rate-limit windows a key can be given a request quota in, with their length in seconds. */
export const WINDOW_SECONDS = { second: 1, minute: 60, hour: 3_600, day: 86_400 } as const;

export type Window = keyof typeof WINDOW_SECONDS;

export const WINDOWS = Object.keys(WINDOW_SECONDS) as Window[];

/** A month, as budgets count it: 30 days from the first use in the window. */
const MONTH_SECONDS = 30 * 86_400;

/** Windows of a token budget, with their length in seconds. */
export const TOKEN_WINDOW_SECONDS = { minute: 60, hour: 3_600, day: 86_400, month: MONTH_SECONDS } as const;
export type TokenWindow = keyof typeof TOKEN_WINDOW_SECONDS;
export const TOKEN_WINDOWS = Object.keys(TOKEN_WINDOW_SECONDS) as TokenWindow[];

/** Windows of a spend budget (US dollars), with their length in seconds. */
export const SPEND_WINDOW_SECONDS = { day: 86_400, month: MONTH_SECONDS } as const;
export type SpendWindow = keyof typeof SPEND_WINDOW_SECONDS;
export const SPEND_WINDOWS = Object.keys(SPEND_WINDOW_SECONDS) as SpendWindow[];

/** The units a budget counts in. */
export const UNITS = ["requests", "tokens", "spend"] as const;
export type Unit = (typeof UNITS)[number];

/**
 * What one subject (an API key, or one end user of it) may use: requests per
 * window (flat, as the contract has always had them), tokens per window, and
 * spend in US dollars per window. An absent window is not limited.
 */
export type UnitLimits = Partial<Record<Window, number>> & {
  tokens?: Partial<Record<TokenWindow, number>>;
  spend?: Partial<Record<SpendWindow, number>>;
};

/**
 * A key's limits: its own, and `endUser`, which applies to each end user of
 * the key separately (the `X-On-Behalf-Of` user, else the key's owner).
 */
export type Limits = UnitLimits & { endUser?: UnitLimits };

/** The windows of each unit, with their length in seconds. */
export const UNIT_WINDOW_SECONDS: Record<Unit, Readonly<Record<string, number>>> = {
  requests: WINDOW_SECONDS,
  tokens: TOKEN_WINDOW_SECONDS,
  spend: SPEND_WINDOW_SECONDS,
};

/** One limited window of a subject: `{unit: "tokens", window: "minute", limit: 100000}`. */
export interface LimitEntry {
  unit: Unit;
  window: string;
  limit: number;
}

/** The limited windows of one subject, requests first, then tokens, then spend. */
export function limitEntries(limits: UnitLimits | undefined): LimitEntry[] {
  if (!limits) return [];
  const out: LimitEntry[] = [];
  for (const window of WINDOWS)
    if (limits[window] !== undefined) out.push({ unit: "requests", window, limit: limits[window] });
  for (const window of TOKEN_WINDOWS) {
    const limit = limits.tokens?.[window];
    if (limit !== undefined) out.push({ unit: "tokens", window, limit });
  }
  for (const window of SPEND_WINDOWS) {
    const limit = limits.spend?.[window];
    if (limit !== undefined) out.push({ unit: "spend", window, limit });
  }
  return out;
}

/** Whether limits count tokens or spend (for the key or its end users): such keys are admitted where the prompt is known. */
export function hasBudgets(limits: Limits): boolean {
  const budgeted = (l: UnitLimits | undefined) => limitEntries(l).some((e) => e.unit !== "requests");
  return budgeted(limits) || limitEntries(limits.endUser).length > 0;
}
