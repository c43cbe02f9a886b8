import { randomBytes } from "node:crypto";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type RunningNodeProcess, startNodeProcess } from "@gw/test-kit";
import { Queue } from "bullmq";
import { afterAll, describe, expect, it, vi } from "vitest";
import { evalClient, finished } from "../test/evals-client.ts";
import { useStack } from "../test/stack.ts";
import { EVAL_QUEUE, EVAL_QUEUE_PREFIX } from "./evals/queue.ts";

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
        // The service's vault: an eval worker opens organizations' provider keys as the service does.
        VAULT_KEYS: stack.vaultKeys,
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

  it("runs a schedule through a byok deployment with the organization's own key, its first use audited with the run's id", async () => {
    const dir = await mkdtemp(join(tmpdir(), "gw-eval-worker-byok-"));
    try {
      const modelsFile = join(dir, "models.yaml");
      await writeFile(
        modelsFile,
        `models:\n  - name: echo-small\n    deployments: [{provider: openai, base_url: "${stack.llm.baseUrl}", model: echo-small, byok: true}]\n`,
      );
      const org = `org-${randomBytes(5).toString("hex")}`;
      const [admin, key] = await Promise.all([
        stack.createKey({ org, permissions: ["admin:api-keys"] }),
        stack.createKey({ org }),
      ]);
      const own = `sk-own-${randomBytes(20).toString("hex")}`;
      const stored = await stack.call(admin.secret, "/api/v1/providers/credentials/openai", {
        method: "PUT",
        json: { api_key: own },
      });
      expect(stored.status).toBe(200);
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
          MODELS_FILE: modelsFile,
          EVAL_WORKER_CONCURRENCY: "1",
          VAULT_KEYS: stack.vaultKeys,
        },
      });
      const evals = evalClient(stack, key.secret);
      const schedule = await evals.created({ name: "own key", inputs: ["paid by us"], every_seconds: 1 });
      const runs = await evals.untilRuns(schedule.id, (r) =>
        expect(finished(r).length).toBeGreaterThanOrEqual(1),
      );
      expect((await evals.delete(schedule.id)).status).toBe(200);
      expect(finished(runs)[0]).toMatchObject({
        status: "completed",
        results: [{ output: "Echo: paid by us" }],
      });
      expect(
        stack.llm.requests.filter((r) => r.authorization === `Bearer ${own}`).length,
      ).toBeGreaterThanOrEqual(1);
      const trail = await (
        await stack.call(admin.secret, "/api/v1/admin/audit?resourceType=provider_key&action=first_use")
      ).json();
      // One record, however many runs used the key: the first one's, named by its run's id.
      expect(trail.data).toEqual([expect.objectContaining({ action: "first_use" })]);
      expect((await evals.allRuns(schedule.id)).map((r) => r.id)).toContain(trail.data[0].requestId);
    } finally {
      await worker?.stop();
      worker = undefined;
      await rm(dir, { recursive: true, force: true });
    }
  });
});
