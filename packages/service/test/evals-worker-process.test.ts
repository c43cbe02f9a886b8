import { type RunningNodeProcess, startNodeProcess } from "@gw/test-kit";
import { Queue } from "bullmq";
import { afterAll, describe, expect, it, vi } from "vitest";
import { EVAL_QUEUE, EVAL_QUEUE_PREFIX } from "../src/evals/queue.ts";
import { evalClient, finished } from "./evals-client.ts";
import { useStack } from "./stack.ts";

// The service runs no eval workers itself: only the separate process below can run anything.
const stack = useStack({ EVAL_WORKER_CONCURRENCY: "0" });
let worker: RunningNodeProcess | undefined;
afterAll(() => worker?.stop());

/** One sample's value on a /metrics page (0 when absent). */
async function sample(url: string, name: string): Promise<number> {
  const line = (await (await fetch(`${url}/metrics`)).text())
    .split("\n")
    .find((l) => l.startsWith(`${name} `));
  return line ? Number(line.split(" ")[1]) : 0;
}

describe("an eval worker in its own process", () => {
  it("picks up the runs, and drops a firing queued before its schedule was deleted", async () => {
    const key = await stack.createKey();
    const evals = evalClient(stack, key.secret);
    const deleted = await evals.created({ name: "deleted", inputs: ["gone"], every_seconds: 1 });
    // Its first firing waits in the queue, as no worker is running.
    const queue = new Queue(EVAL_QUEUE, { connection: stack.redis, prefix: EVAL_QUEUE_PREFIX });
    await vi.waitFor(async () => expect((await queue.getJobCounts("waiting")).waiting).toBe(1), {
      timeout: 10_000,
    });
    await queue.close();
    expect((await evals.delete(deleted.id)).status).toBe(200);
    const live = await evals.created({ name: "live", inputs: ["far away"], every_seconds: 1 });

    worker = await startNodeProcess({
      name: "eval-worker",
      entry: "packages/service/src/eval-worker-main.ts",
      port: 0,
      env: {
        PATH: process.env.PATH,
        HOST: "127.0.0.1",
        LOG_LEVEL: "warn",
        REDIS_URL: stack.redisUrl,
        DATABASE_URL: stack.database.url,
        LLM_BASE_URL: stack.llm.baseUrl,
        LLM_DEFAULT_MODEL: "echo-small",
        EVAL_WORKER_CONCURRENCY: "2",
      },
    });
    const runs = await evals.untilRuns(live.id, (r) => expect(finished(r).length).toBeGreaterThanOrEqual(2));
    expect(finished(runs)[0]).toMatchObject({
      status: "completed",
      results: [{ input: "far away", output: "Echo: far away" }],
    });
    const dropped = 'service_eval_runs_total{outcome="dropped"}';
    await vi.waitFor(async () => expect(await sample(worker!.url, dropped)).toBe(1), { timeout: 10_000 });
    expect(await evals.allRuns(deleted.id)).toEqual([]);
    expect(await sample(worker.url, 'service_eval_runs_total{outcome="completed"}')).toBeGreaterThanOrEqual(
      2,
    );
    expect(await sample(stack.serviceUrl, 'service_eval_runs_total{outcome="completed"}')).toBe(0);
    expect((await evals.delete(live.id)).status).toBe(200);

    // SIGTERM: it finishes what it holds and exits cleanly.
    const exited = new Promise<number | null>((r) => worker!.process.once("exit", (code) => r(code)));
    await worker.stop();
    expect(await exited).toBe(0);
    worker = undefined;
  });
});
