/**
 * Runs `run` every `intervalMs` until `close`, never two at once (a run still
 * going when the next is due skips it); a failed run goes to `failed` and is
 * tried again at the next interval. The timer keeps no process alive.
 */
export class Periodic {
  private readonly run: () => Promise<unknown>;
  private readonly intervalMs: number;
  private readonly failed: (err: Error) => void;
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<unknown> | undefined;

  constructor(run: () => Promise<unknown>, intervalMs: number, failed: (err: Error) => void) {
    this.run = run;
    this.intervalMs = intervalMs;
    this.failed = failed;
  }

  start(): void {
    this.timer = setInterval(() => {
      if (this.running) return;
      this.running = this.run()
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
