import { describe, expect, it } from "vitest";
import { closeWorker } from "./worker.ts";

/** A BullMQ worker as `closeWorker` uses it, recording what it was asked; cancelling ends `job`. */
function fakeWorker(job?: { end: () => void }) {
  const asked: string[] = [];
  return {
    asked,
    worker: {
      pause: async () => {
        asked.push("pause");
      },
      cancelAllJobs: (reason?: string) => {
        asked.push(`cancel: ${reason}`);
        job?.end();
      },
      close: async () => {
        asked.push("close");
      },
    },
  };
}

describe("closeWorker (WORKERS_SHUTDOWN_GRACE)", () => {
  it("lets a job in progress finish within the grace, then closes without cancelling it", async () => {
    let end!: () => void;
    const running = new Set([new Promise<void>((resolve) => (end = resolve))]);
    const { asked, worker } = fakeWorker();
    const closing = closeWorker(worker, running, 60_000);
    await Promise.resolve();
    end();
    running.clear();
    await closing;
    expect(asked).toEqual(["pause", "close"]);
  });

  it("cancels the jobs still running once the grace has passed, then closes", async () => {
    let end!: () => void;
    const job = new Promise<void>((resolve) => (end = resolve));
    const running = new Set([job]);
    const { asked, worker } = fakeWorker({
      end: () => {
        end();
        running.clear();
      },
    });
    await closeWorker(worker, running, 20);
    expect(asked).toEqual(["pause", "cancel: shutting down", "close"]);
  });
});
