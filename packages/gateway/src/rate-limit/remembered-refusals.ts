import { type Limits, WINDOWS } from "@gw/core";
import type { GatewayMetrics } from "../metrics.ts";
import type { Decision, QuotaLimiter, WindowState } from "./quota.ts";

interface Refusal {
  decision: Extract<Decision, { allowed: false }>;
  /** `performance.now()` when the decision was asked for, and until when it stands. */
  askedAt: number;
  until: number;
}

/**
 * Answers a refused key locally until the refusing window resets. A fixed
 * window only fills up until it ends, and a refused request counts nowhere,
 * so a refusal cannot turn into an admission before that reset; a change of
 * the key's limits is a different entry. The reset is timed from when the
 * decision was asked for, which is before Redis made it: the local refusal
 * never outlives the real one.
 */
export class RememberedRefusals implements QuotaLimiter {
  private readonly inner: QuotaLimiter;
  private readonly refusals = new Map<string, Refusal>();
  private readonly maxEntries: number;
  private readonly metrics: Pick<GatewayMetrics, "rateLimitDecisions">;

  constructor(inner: QuotaLimiter, metrics: Pick<GatewayMetrics, "rateLimitDecisions">, maxEntries = 10_000) {
    this.inner = inner;
    this.metrics = metrics;
    this.maxEntries = maxEntries;
  }

  async decide(keyId: string, limits: Limits): Promise<Decision> {
    const entry = entryKey(keyId, limits);
    const now = performance.now();
    const refusal = this.refusals.get(entry);
    if (refusal) {
      if (refusal.until > now) {
        this.metrics.rateLimitDecisions.inc({
          outcome: "rejected",
          window: refusal.decision.refusedBy.window,
          store: "local",
        });
        return elapsed(refusal.decision, now - refusal.askedAt);
      }
      this.refusals.delete(entry);
    }
    const decision = await this.inner.decide(keyId, limits);
    if (!decision.allowed) {
      if (this.refusals.size >= this.maxEntries) this.refusals.delete(this.refusals.keys().next().value!);
      this.refusals.set(entry, { decision, askedAt: now, until: now + decision.refusedBy.resetMs });
    }
    return decision;
  }

  peek(keyId: string, limits: Limits): Promise<WindowState[]> {
    return this.inner.peek(keyId, limits);
  }
}

function entryKey(keyId: string, limits: Limits): string {
  let key = keyId;
  for (const w of WINDOWS) key += `|${limits[w] ?? ""}`;
  return key;
}

/** The same refusal, `ms` later: every window is that much closer to its reset. */
function elapsed(decision: Extract<Decision, { allowed: false }>, ms: number): Decision {
  const later = (s: WindowState): WindowState => ({ ...s, resetMs: Math.max(0, s.resetMs - ms) });
  return { allowed: false, refusedBy: later(decision.refusedBy), windows: decision.windows.map(later) };
}
