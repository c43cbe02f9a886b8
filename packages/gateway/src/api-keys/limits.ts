import { type Limits, SPEND_WINDOWS, TOKEN_WINDOWS, type UnitLimits, WINDOWS } from "@gw/core/limits";

type Patch = Record<string, unknown> | null | undefined;

/**
 * Applies a limits change: a number sets a window, `null` removes a window
 * (or a whole unit, or `endUser`), an absent field stays. Returns only what
 * is limited, in a stable order.
 */
export function patchLimits(current: Limits, patch: Patch): Limits {
  const out = patchUnits(current, patch) as Limits;
  const endUser = patch && "endUser" in patch ? patch.endUser : undefined;
  const merged = endUser === null ? undefined : patchUnits(current.endUser ?? {}, endUser as Patch);
  if (merged && Object.keys(merged).length > 0) out.endUser = merged;
  return out;
}

/**
 * A copy of a key's limits with the request windows that apply to it: its own, or, when it has none,
 * `DEFAULT_LIMITS`' (`defaults`). What the rate limit counts and what a key's usage shows.
 */
export function withDefaultRequestWindows(keyLimits: Limits, defaults: Limits): Limits {
  const limits: Limits = { ...keyLimits };
  if (WINDOWS.some((w) => keyLimits[w] !== undefined)) return limits;
  for (const w of WINDOWS) if (defaults[w] !== undefined) limits[w] = defaults[w];
  return limits;
}

/** One subject's limits after `patch` (see `patchLimits`). */
export function patchUnits(current: UnitLimits, patch: Patch): UnitLimits {
  const out: UnitLimits = {};
  for (const w of WINDOWS) {
    const value = patch && w in patch ? patch[w] : current[w];
    if (typeof value === "number") out[w] = value;
  }
  const tokens = windows(TOKEN_WINDOWS, current.tokens, patch?.tokens as Patch);
  if (tokens) out.tokens = tokens;
  const spend = windows(SPEND_WINDOWS, current.spend, patch?.spend as Patch);
  if (spend) out.spend = spend;
  return out;
}

function windows<W extends string>(
  names: readonly W[],
  current: Partial<Record<W, number>> | undefined,
  patch: Patch,
): Partial<Record<W, number>> | undefined {
  if (patch === null) return undefined;
  const out: Partial<Record<W, number>> = {};
  for (const w of names) {
    const value = patch && w in patch ? patch[w] : current?.[w];
    if (typeof value === "number") out[w] = value;
  }
  return Object.keys(out).length > 0 ? out : undefined;
}
