import { type Clock, systemClock } from "@gw/core/clock";
import type { Limits } from "@gw/core/limits";
import { entryKey } from "./leased-windows.ts";
import type { Decision, QuotaLimiter, WindowState } from "./quota.ts";

interface Refusal {
  decision: Extract<Decision, { allowed: false }>;
  /** The clock's time when the decision was asked for, and until when it stands. */
  askedAt: number;
  until: number;
}

/**
 * Answers a refused key locally until the refusing window resets. A fixed
 * window only fills up until it ends, and a refused request counts nowhere,
 * so a refusal cannot turn into an admission before that reset; a change of
 * the key's limits is a different entry. The reset is timed from when the
 * decision was asked for, which is before Redis made it: the local refusal
 * never outlives the real one. Where leases may give points back (heavy
 * keys), a refusal is trusted only for as long as a lease lasts
 * (`trustMs`), then Redis is asked again.
 */
export class RememberedRefusals implements QuotaLimiter {
  private readonly inner: QuotaLimiter;
  private readonly refusals = new Map<string, Refusal>();
  private readonly maxEntries: number;
  private readonly trustMs: (limits: Limits) => number;
  private readonly clock: Clock;

  constructor(
    inner: QuotaLimiter,
    trustMs: (limits: Limits) => number = () => Number.POSITIVE_INFINITY,
    maxEntries = 10_000,
    clock: Clock = systemClock,
  ) {
    this.inner = inner;
    this.trustMs = trustMs;
    this.maxEntries = maxEntries;
    this.clock = clock;
  }

  async decide(keyId: string, limits: Limits): Promise<Decision> {
    const entry = entryKey(keyId, limits);
    const now = this.clock.now();
    const refusal = this.refusals.get(entry);
    if (refusal) {
      if (refusal.until > now) return elapsed(refusal.decision, now - refusal.askedAt);
      this.refusals.delete(entry);
    }
    const decision = await this.inner.decide(keyId, limits);
    if (!decision.allowed) {
      if (this.refusals.size >= this.maxEntries) this.refusals.delete(this.refusals.keys().next().value!);
      const until = now + Math.min(decision.refusedBy.resetMs, this.trustMs(limits));
      this.refusals.set(entry, { decision, askedAt: now, until });
    }
    return decision;
  }

  peek(keyId: string, limits: Limits): Promise<WindowState[]> {
    return this.inner.peek(keyId, limits);
  }
}

/** The same refusal, `ms` later: every window is that much closer to its reset. */
function elapsed(decision: Extract<Decision, { allowed: false }>, ms: number): Decision {
  const later = (s: WindowState): WindowState => ({ ...s, resetMs: Math.max(0, s.resetMs - ms) });
  return {
    allowed: false,
    refusedBy: later(decision.refusedBy),
    windows: decision.windows.map(later),
    source: "local",
  };
}
