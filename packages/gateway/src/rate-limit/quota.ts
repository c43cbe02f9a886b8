import type { Limits, Window } from "@gw/core/limits";

/** One window's standing after a decision. */
export interface WindowState {
  window: Window;
  /** The quota: requests admitted per window. */
  limit: number;
  /** Window length in seconds. */
  seconds: number;
  /** Requests still admitted in the current window. */
  remaining: number;
  /** Milliseconds until the current window ends. */
  resetMs: number;
}

/** Where a decision came from, when not from the store asked: a lease, or a remembered refusal. */
export type DecisionSource = "lease" | "local";

export type Decision =
  | { allowed: true; windows: WindowState[]; source?: DecisionSource }
  | { allowed: false; refusedBy: WindowState; windows: WindowState[]; source?: DecisionSource };

/**
 * Decides whether one more request of a key fits all of its quotas. A
 * request either counts in every window or, when any window refuses it, in
 * none. Implementations throw `QuotaStoreError` when their store fails.
 */
export interface QuotaLimiter {
  decide(keyId: string, limits: Limits): Promise<Decision>;
  /** Current standing without counting a request (for operators and tests). */
  peek(keyId: string, limits: Limits): Promise<WindowState[]>;
}

export class QuotaStoreError extends Error {
  constructor(cause: unknown) {
    super(`rate-limit store failed: ${(cause as Error)?.message ?? String(cause)}`, { cause });
    this.name = "QuotaStoreError";
  }
}
