import { type Clock, systemClock } from "@gw/core/clock";
import { AppError } from "@gw/core/errors";
import type { Limits } from "@gw/core/limits";
import type { Logger } from "@gw/core/logger";
import type { GatewayMetrics } from "../metrics.ts";
import { type Decision, type QuotaLimiter, QuotaStoreError, type WindowState } from "./quota.ts";

export type FailMode = "open" | "closed";

/** Rate limiting could not be decided and the fail mode is `closed`. */
export class RateLimitUnavailable extends AppError {
  constructor(cause: unknown) {
    super("service_unavailable", "Rate limiting is unavailable; try again", { cause });
    this.name = "RateLimitUnavailable";
  }
}

/** After a store failure, how long decisions skip the store before trying it again. */
const STORE_RETRY_MS = 1_000;

/**
 * Redis first; when it fails, either the in-memory insurance limiter keeps
 * enforcing the same quotas on this replica (`open`, the default) or the
 * request is refused with 503 (`closed`). After a failure the store is left
 * alone for a second, then tried again: recovery needs no one.
 */
export class InsuredLimiter implements QuotaLimiter {
  private readonly primary: QuotaLimiter;
  private readonly insurance: QuotaLimiter;
  private readonly mode: FailMode;
  private readonly metrics: GatewayMetrics;
  private readonly logger: Logger;
  private readonly clock: Clock;
  /** The clock's time until which decisions skip the store; 0 while it works. */
  private storeDownUntil = 0;

  constructor(opts: {
    primary: QuotaLimiter;
    insurance: QuotaLimiter;
    mode: FailMode;
    metrics: GatewayMetrics;
    logger: Logger;
    clock?: Clock;
  }) {
    this.clock = opts.clock ?? systemClock;
    this.primary = opts.primary;
    this.insurance = opts.insurance;
    this.mode = opts.mode;
    this.metrics = opts.metrics;
    this.logger = opts.logger;
  }

  async decide(keyId: string, limits: Limits): Promise<Decision> {
    const stop = this.metrics.rateLimitDecisionSeconds.startTimer();
    try {
      const { decision, store: asked } = await this.decideSomewhere(keyId, limits);
      const store = decision.source ?? asked;
      if (decision.allowed) {
        for (const w of decision.windows)
          this.metrics.rateLimitDecisions.inc({ outcome: "allowed", window: w.window, store });
      } else {
        this.metrics.rateLimitDecisions.inc({
          outcome: "rejected",
          window: decision.refusedBy.window,
          store,
        });
      }
      return decision;
    } finally {
      stop();
    }
  }

  peek(keyId: string, limits: Limits): Promise<WindowState[]> {
    return this.primary.peek(keyId, limits);
  }

  private async decideSomewhere(
    keyId: string,
    limits: Limits,
  ): Promise<{ decision: Decision; store: string }> {
    if (this.clock.now() >= this.storeDownUntil) {
      try {
        const decision = await this.primary.decide(keyId, limits);
        if (this.storeDownUntil !== 0) {
          this.storeDownUntil = 0;
          this.logger.info("rate-limit store is back");
        }
        return { decision, store: "redis" };
      } catch (err) {
        if (!(err instanceof QuotaStoreError)) throw err;
        this.metrics.rateLimitStoreErrors.inc();
        if (this.storeDownUntil === 0)
          this.logger.warn({ err: err.message, mode: this.mode }, "rate-limit store failed");
        this.storeDownUntil = this.clock.now() + STORE_RETRY_MS;
      }
    }
    this.metrics.rateLimitFallbacks.inc({ mode: this.mode });
    if (this.mode === "closed") throw new RateLimitUnavailable(new Error("store unavailable"));
    return { decision: await this.insurance.decide(keyId, limits), store: "memory" };
  }
}
