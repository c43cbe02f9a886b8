/**
 * A background job: `start` runs `runOnce` every `intervalMs` until `close`, never two at once (a run
 * still going when the next is due skips it); a failed run goes to `failed` and is tried again at the
 * next interval. The timer keeps no process alive.
 */
export abstract class Periodic {
  private readonly intervalMs: number;
  private readonly failed: (err: Error) => void;
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<unknown> | undefined;

  constructor(intervalMs: number, failed: (err: Error) => void) {
    this.intervalMs = intervalMs;
    this.failed = failed;
  }

  /** One run of the job. */
  protected abstract runOnce(): Promise<unknown>;

  /** Runs the job every interval until `close`. */
  start(): void {
    this.timer = setInterval(() => {
      if (this.running) return;
      this.running = this.runOnce()
        .catch(this.failed)
        .finally(() => {
          this.running = undefined;
        });
    }, this.intervalMs);
    this.timer.unref();
  }

  /** Stops the timer and waits for a run under way. */
  async close(): Promise<void> {
    clearInterval(this.timer);
    await this.running;
  }
}
