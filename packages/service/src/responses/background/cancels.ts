import type { Logger } from "@gw/core/logger";
import type { RedisClient } from "@gw/core/redis";

/** The channel a cancel is published on: every worker hears it, and the one running the response stops it. */
const CHANNEL = "gw:bg:cancel";

/**
 * Cancels of running background responses, over Redis pub/sub: `cancel`
 * publishes `<org> <response id>`; each worker `listen`s on a connection of
 * its own and aborts the run's signal if it runs that response. A worker
 * that misses one (its connection was down) still finds the response
 * cancelled in the store when its run ends, and keeps it so.
 */
export class CancelSignals {
  private readonly running = new Map<string, AbortController>();

  private readonly publisher: RedisClient;

  constructor(publisher: RedisClient) {
    this.publisher = publisher;
  }

  async cancel(org: string, responseId: string): Promise<void> {
    await this.publisher.publish(CHANNEL, `${org} ${responseId}`);
  }

  /** Subscribes `subscriber` (a connection given to it alone) to cancels. */
  async listen(subscriber: RedisClient, logger: Logger): Promise<void> {
    subscriber.on("message", (_channel: string, message: string) => {
      this.running.get(message)?.abort(new Error("cancelled"));
    });
    subscriber.on("error", (err: Error) =>
      logger.warn({ err: err.message }, "background cancel listener error"),
    );
    await subscriber.subscribe(CHANNEL);
  }

  /** The signal that aborts this run when the response is cancelled; `done` once it ended. */
  watch(org: string, responseId: string): { signal: AbortSignal; done(): void } {
    const key = `${org} ${responseId}`;
    const controller = new AbortController();
    this.running.set(key, controller);
    return { signal: controller.signal, done: () => this.running.delete(key) };
  }
}
