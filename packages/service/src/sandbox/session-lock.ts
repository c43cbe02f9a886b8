import { randomBytes } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import { AppError, type RedisClient } from "@gw/core";

export class SessionBusy extends AppError {
  constructor(waitedMs: number) {
    super("conflict", `Another push of this session is still running after ${waitedMs} ms; try again`);
    this.name = "SessionBusy";
  }
}

export class LockLost extends AppError {
  constructor() {
    super(
      "service_unavailable",
      "The push lost its session lock (Redis did not confirm it in time) and was stopped; try again",
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

  constructor(redis: RedisClient, options: LockOptions) {
    this.redis = redis;
    this.options = options;
  }

  async withLock<T>(
    key: string,
    wait: { signal?: AbortSignal; onBusy?: () => void | Promise<void> },
    work: (lost: AbortSignal) => Promise<T>,
  ): Promise<T> {
    const token = randomBytes(16).toString("hex");
    await this.acquire(key, token, wait);
    const lost = new AbortController();
    let confirmedAt = Date.now();
    const renewal = setInterval(() => {
      this.redis.eval(EXTEND, 1, key, token, this.options.ttlMs).then(
        (extended) => {
          if (extended === 1) confirmedAt = Date.now();
          else lost.abort(new LockLost());
        },
        () => {
          if (Date.now() - confirmedAt >= this.options.ttlMs) lost.abort(new LockLost());
        },
      );
    }, this.options.ttlMs / 3);
    try {
      return await work(lost.signal);
    } catch (err) {
      throw lost.signal.aborted ? new LockLost() : err;
    } finally {
      clearInterval(renewal);
      // If Redis is away, the lock expires by itself.
      await this.redis.eval(RELEASE, 1, key, token).catch(() => undefined);
    }
  }

  private async acquire(
    key: string,
    token: string,
    wait: { signal?: AbortSignal; onBusy?: () => void | Promise<void> },
  ): Promise<void> {
    const started = Date.now();
    for (let attempt = 0; ; attempt++) {
      if ((await this.redis.set(key, token, "PX", this.options.ttlMs, "NX")) === "OK") return;
      if (attempt === 0) await wait.onBusy?.();
      const waited = Date.now() - started;
      if (waited >= this.options.waitMs) throw new SessionBusy(waited);
      await sleep(Math.min(25 * 2 ** Math.min(attempt, 3), 200), undefined, { signal: wait.signal }).catch(
        (err) => {
          throw wait.signal?.reason ?? err;
        },
      );
    }
  }
}
