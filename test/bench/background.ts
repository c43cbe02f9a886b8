/**
 * Background responses (`BENCH_ONLY=background`): through gateway and
 * service (each its own process, the service's workers at their default
 * `BACKGROUND_RESPONSE_CONCURRENCY`) with the test kit's fake provider
 * (a short streamed answer), how many go from queued to completed a second
 * when `BENCH_BACKGROUND_RESPONSES` (default 400) are created at once by 16
 * callers (the end read from the service's
 * `service_background_responses_total`, not by polling each), the p50 of
 * the create itself (the queued answer), and the time to the first event of
 * a resumed stream (`GET /responses/{id}?stream=true&starting_after=N`) of
 * a response that has ended, `BENCH_BACKGROUND_RESUMES` times (default 200).
 * Alone: `pnpm exec node test/bench/background.ts` (prints; `BENCH_OUTPUT`
 * writes a report).
 */

import { DEFAULT_PERMISSIONS } from "@gw/core/permissions";
import { createRedis } from "@gw/core/redis";
import { ApiKeyStore } from "@gw/gateway";
import { bearer, p50, startModelStack } from "./model-calls.ts";
import { Report } from "./report.ts";

const RESPONSES = Number(process.env.BENCH_BACKGROUND_RESPONSES ?? 400);
const RESUMES = Number(process.env.BENCH_BACKGROUND_RESUMES ?? 200);
const CALLERS = 16;
const PATH = "/api/v1/llm/responses";

const p99 = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * 0.99))] ?? 0;
};

/** The service's count of background responses it completed (its `/metrics`). */
async function completed(serviceUrl: string): Promise<number> {
  const text = await (await fetch(`${serviceUrl}/metrics`)).text();
  const line = text
    .split("\n")
    .find((l) => l.startsWith('service_background_responses_total{status="completed"}'));
  return line ? Number(line.split(" ")[1]) : 0;
}

export async function benchBackground(report: Report): Promise<void> {
  const stack = await startModelStack();
  try {
    const pair = await stack.startPair("background", { BACKGROUND_RESPONSES_PER_KEY: String(RESPONSES * 2) });
    const client = createRedis(stack.redisUrl, { connectionName: "bench-background" });
    const key = await new ApiKeyStore(client).create({
      org: "bench-background",
      owner: "alice",
      permissions: [...DEFAULT_PERMISSIONS],
    });
    client.disconnect();
    const headers = bearer(key.secret);
    const create = async (body: Record<string, unknown>) => {
      const started = performance.now();
      const res = await fetch(`${pair.gateway.url}${PATH}`, {
        method: "POST",
        headers,
        body: JSON.stringify({ input: "hello there", background: true, ...body }),
      });
      if (!res.ok) throw new Error(`create: HTTP ${res.status} ${await res.text()}`);
      return { ms: performance.now() - started, res };
    };
    // Warm-up: the processes' first calls compile what they run.
    for (let i = 0; i < 20; i++) await (await create({})).res.json();
    const before = await completed(pair.service.url);

    const createdMs: number[] = [];
    let next = 0;
    const started = performance.now();
    await Promise.all(
      Array.from({ length: CALLERS }, async () => {
        while (next++ < RESPONSES) {
          const { ms, res } = await create({});
          await res.json();
          createdMs.push(ms);
        }
      }),
    );
    const submitted = performance.now();
    while ((await completed(pair.service.url)) - before < RESPONSES)
      await new Promise((r) => setTimeout(r, 20));
    const ended = performance.now();

    // A streamed one, read to its end; then its stream resumed after its third event, again and again.
    const streamed = await create({ stream: true });
    const events = (await streamed.res.text()).split("\n\n").filter(Boolean);
    const id = JSON.parse(/^data: (.+)$/m.exec(events[0]!)![1]!).response.id as string;
    const firstEventMs: number[] = [];
    for (let i = 0; i < RESUMES + 20; i++) {
      const t0 = performance.now();
      const res = await fetch(`${pair.gateway.url}${PATH}/${id}?stream=true&starting_after=2`, { headers });
      const reader = res.body!.getReader();
      await reader.read();
      if (i >= 20) firstEventMs.push(performance.now() - t0);
      await reader.cancel();
    }

    const seconds = (ended - started) / 1000;
    report.section(
      "Background responses: queued to completed, and a resumed stream's first event",
      `${RESPONSES} background responses (\`background: true\`, a two-word streamed answer from the fake provider) created by ${CALLERS} callers at once through gateway and service (each its own process; the service's workers ${"`BACKGROUND_RESPONSE_CONCURRENCY`"} at its default, 8), on one key; the end is the service's own count of completed runs. Then one ended response's stream resumed after its third event (\`GET /responses/{id}?stream=true&starting_after=2\`) ${RESUMES} times, one at a time: the time to the first event's bytes.`,
    );
    report.table(
      ["measure", "value"],
      [
        [
          "queued → completed, per second (all created until all completed)",
          (RESPONSES / seconds).toFixed(1),
        ],
        ["time to create them all (the queued answers)", `${(submitted - started).toFixed(0)} ms`],
        ["time until the last completed", `${(ended - started).toFixed(0)} ms`],
        [
          "create (the queued answer), p50 / p99",
          `${p50(createdMs).toFixed(2)} / ${p99(createdMs).toFixed(2)} ms`,
        ],
        [
          "resumed stream, first event, p50 / p99",
          `${p50(firstEventMs).toFixed(2)} / ${p99(firstEventMs).toFixed(2)} ms`,
        ],
      ],
    );
  } finally {
    await stack.close();
  }
}

if (import.meta.main) {
  const report = new Report();
  const startedAt = new Date();
  const { loadavg } = await import("node:os");
  const load0 = loadavg() as [number, number, number];
  await benchBackground(report);
  if (process.env.BENCH_OUTPUT) await report.write(process.env.BENCH_OUTPUT, startedAt, load0);
  process.exit(0);
}
