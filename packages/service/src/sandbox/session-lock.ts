import { randomBytes } from "node:crypto";
import { type Clock, systemClock } from "@gw/core/clock";
import { AppError } from "@gw/core/errors";
import type { RedisClient } from "@gw/core/redis";

export class SessionBusy extends AppError {
  constructor(waitedMs: number) {
    super("conflict", `Another push of this session is still running after ${waitedMs} ms; try again`, {
      reason: "session_busy",
    });
    this.name = "SessionBusy";
  }
}

export class LockLost extends AppError {
  constructor() {
    super(
      "service_unavailable",
      "The push lost its session lock (Redis did not confirm it in time) and was stopped; try again",
      { reason: "lock_lost" },
    );
    this.name = "LockLost";
  }
}

/** Deletes the lock only if it is still ours: an expired lock someone else took is left alone. */
const RELEASE = `
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0`;

const EXTEND = `
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return 0`;

export interface LockOptions {
  /** Lifetime of the lock in Redis; it is extended every third of it while held. */
  ttlMs: number;
  /** How long to wait for a held lock before giving up. */
  waitMs: number;
}

/**
 * One holder at a time per key across every replica sharing the Redis: `SET
 * NX PX` with a random token, extended while the work runs, released by a
 * compare-and-delete script. A waiter polls until the lock is free. If the
 * lock cannot be extended (Redis away longer than its lifetime, or the key
 * taken over), the work is told through the signal it was given, so its git
 * processes stop instead of running beside another holder.
 */
export class SessionLocks {
  private readonly redis: RedisClient;
  private readonly options: LockOptions;
  private readonly clock: Clock;

  constructor(redis: RedisClient, options: LockOptions, clock: Clock = systemClock) {
    this.redis = redis;
    this.options = options;
    this.clock = clock;
  }

  async withLock<T>(
    key: string,
    wait: { signal?: AbortSignal; onBusy?: () => void | Promise<void> },
    work: (lost: AbortSignal) => Promise<T>,
  ): Promise<T> {
    const token = randomBytes(16).toString("hex");
    await this.acquire(key, token, wait);
    const lost = new AbortController();
    let confirmedAt = this.clock.now();
    let cancelRenewal = () => {};
    const renew = () => {
      cancelRenewal = this.clock.schedule(this.options.ttlMs / 3, renew);
      this.redis.eval(EXTEND, 1, key, token, this.options.ttlMs).then(
        (extended) => {
          if (extended === 1) confirmedAt = this.clock.now();
          else lost.abort(new LockLost());
        },
        () => {
          if (this.clock.now() - confirmedAt >= this.options.ttlMs) lost.abort(new LockLost());
        },
      );
    };
    cancelRenewal = this.clock.schedule(this.options.ttlMs / 3, renew);
    try {
      return await work(lost.signal);
    } catch (err) {
      throw lost.signal.aborted ? new LockLost() : err;
    } finally {
      cancelRenewal();
      // If Redis is away, the lock expires by itself.
      await this.redis.eval(RELEASE, 1, key, token).catch(() => undefined);
    }
  }

  private async acquire(
    key: string,
    token: string,
    wait: { signal?: AbortSignal; onBusy?: () => void | Promise<void> },
  ): Promise<void> {
    const started = this.clock.now();
    for (let attempt = 0; ; attempt++) {
      if ((await this.redis.set(key, token, "PX", this.options.ttlMs, "NX")) === "OK") return;
      if (attempt === 0) await wait.onBusy?.();
      const waited = this.clock.now() - started;
      if (waited >= this.options.waitMs) throw new SessionBusy(Math.round(waited));
      await this.pause(Math.min(25 * 2 ** Math.min(attempt, 3), 200), wait.signal);
    }
  }

  /** Waits `ms` on the clock, or rejects with the signal's reason once it aborts. */
  private pause(ms: number, signal: AbortSignal | undefined): Promise<void> {
    return new Promise((resolve, reject) => {
      signal?.throwIfAborted();
      const aborted = () => {
        cancel();
        reject(signal!.reason);
      };
      const cancel = this.clock.schedule(ms, () => {
        signal?.removeEventListener("abort", aborted);
        resolve();
      });
      signal?.addEventListener("abort", aborted, { once: true });
    });
  }
}
