import { createPostgres } from "@gw/core/postgres";
import { describeEachTopology, scanKeys } from "@gw/test-kit";
import { Queue } from "bullmq";
import { CronExpressionParser } from "cron-parser";
import { describe, expect, it, vi } from "vitest";
import { evalClient, finished, type RunJson } from "../../../test/evals-client.ts";
import { llmError, useStack } from "../../../test/stack.ts";
import { utcDay } from "../../usage/store.ts";
import { EVAL_QUEUE, EVAL_QUEUE_PREFIX } from "../queue.ts";

// Runs held at the model must outlast the test's barrier.
describeEachTopology("on %s Redis", (topology) => {
  const stack = useStack({ LLM_TIMEOUT_MS: "30000" }, {}, undefined, topology);

  const INPUTS = [
    "hello there",
    { input: "say yes", expected: "yes" },
    { input: "say no", expected: "maybe" },
  ];

  /** A schedule object's fields in the contract's order, with its cadence's. */
  const fieldsWith = (...cadence: string[]) => [
    "id",
    "object",
    "name",
    "model",
    "inputs",
    ...cadence,
    "created_at",
    "next_run_at",
    "metadata",
  ];

  /** `use` of a BullMQ client of the stack's eval queue, closed after. */
  async function withEvalQueue<T>(use: (queue: Queue) => Promise<T>): Promise<T> {
    const queue = new Queue(EVAL_QUEUE, { connection: stack.redis, prefix: EVAL_QUEUE_PREFIX });
    try {
      return await use(queue);
    } finally {
      await queue.close();
    }
  }

  /** Resolves once no eval job is running or waiting to (ticks of deleted schedules start none). */
  const untilNoEvalJobs = () =>
    withEvalQueue((queue) =>
      vi.waitFor(
        async () =>
          expect(await queue.getJobCounts("active", "waiting", "prioritized")).toEqual({
            active: 0,
            waiting: 0,
            prioritized: 0,
          }),
        { timeout: 20_000, interval: 50 },
      ),
    );

  /** A schedule's job scheduler as BullMQ holds it. */
  const jobScheduler = (id: string) => withEvalQueue((queue) => queue.getJobScheduler(id));

  describe("eval schedules", () => {
    it("a 1-second schedule runs its inputs through the model, with outputs and pass/fail", async () => {
      const key = await stack.createKey();
      const evals = evalClient(stack, key.secret);
      const before = Math.floor(Date.now() / 1000);
      const res = await evals.create({
        name: "smoke",
        inputs: INPUTS,
        every_seconds: 1,
        metadata: { team: "search" },
      });
      const after = Math.ceil(Date.now() / 1000);
      expect(res.status).toBe(200);
      const schedule = await res.json();
      expect(Object.keys(schedule)).toEqual(fieldsWith("every_seconds"));
      expect(schedule).toEqual({
        id: expect.stringMatching(/^eval_sched_[A-Za-z0-9_-]{22}$/),
        object: "eval.schedule",
        name: "smoke",
        model: "auto",
        inputs: INPUTS,
        every_seconds: 1,
        created_at: expect.any(Number),
        next_run_at: expect.any(Number),
        metadata: { team: "search" },
      });
      // Made while the request ran, and the first run at most one interval after the schedule was.
      expect(schedule.created_at).toBeGreaterThanOrEqual(before);
      expect(schedule.created_at).toBeLessThanOrEqual(after);
      expect(schedule.next_run_at).toBeGreaterThanOrEqual(schedule.created_at);
      expect(schedule.next_run_at).toBeLessThanOrEqual(after + 1);
      expect(await (await evals.get(schedule.id)).json()).toMatchObject({ id: schedule.id, name: "smoke" });
      expect((await jobScheduler(schedule.id))?.every).toBe(1000);

      const runs = await evals.untilRuns(schedule.id, (r) =>
        expect(finished(r).length).toBeGreaterThanOrEqual(2),
      );
      const run = finished(runs)[0]!;
      expect(run).toEqual({
        id: expect.stringMatching(/^eval_run_[A-Za-z0-9_-]{22}$/),
        object: "eval.run",
        schedule_id: schedule.id,
        status: "completed",
        model: "echo-small",
        created_at: expect.any(Number),
        started_at: expect.any(Number),
        completed_at: expect.any(Number),
        error: null,
        results: [
          {
            input: "hello there",
            expected: null,
            output: "Echo: hello there",
            passed: null,
            usage: { input_tokens: 5, output_tokens: 3, total_tokens: 8 },
          },
          {
            input: "say yes",
            expected: "yes",
            output: "Echo: say yes",
            passed: true,
            usage: { input_tokens: 5, output_tokens: 3, total_tokens: 8 },
          },
          {
            input: "say no",
            expected: "maybe",
            output: "Echo: say no",
            passed: false,
            usage: { input_tokens: 5, output_tokens: 3, total_tokens: 8 },
          },
        ],
        usage: { input_tokens: 15, output_tokens: 9, total_tokens: 24 },
      });
      expect(run.started_at!).toBeGreaterThanOrEqual(run.created_at);
      expect(run.completed_at!).toBeGreaterThanOrEqual(run.started_at!);
      // Runs are listed newest first.
      const created = runs.map((r) => r.created_at);
      expect(created).toEqual([...created].sort((a, b) => b - a));
      expect((await evals.delete(schedule.id)).status).toBe(200);
    });

    it("after DELETE no run starts over three periods, and the earlier runs stay readable", async () => {
      const key = await stack.createKey();
      const evals = evalClient(stack, key.secret);
      const doomed = await evals.created({ name: "doomed", inputs: ["a"], every_seconds: 1 });
      // A second schedule is the clock: its runs show that periods went by.
      const clock = await evals.created({ name: "clock", inputs: ["tick"], every_seconds: 1 });
      await evals.untilRuns(doomed.id, (r) => expect(finished(r).length).toBeGreaterThanOrEqual(2));

      const res = await evals.delete(doomed.id);
      expect(res.status).toBe(200);
      expect(res.headers.get("content-type")).toMatch(/^application\/json/);
      expect(await res.text()).toBe(`{"id":"${doomed.id}","object":"eval.schedule.deleted","deleted":true}`);
      expect(await jobScheduler(doomed.id)).toBeUndefined();
      const atDelete = await evals.allRuns(doomed.id);
      const clockAtDelete = (await evals.allRuns(clock.id)).length;

      const get = await evals.get(doomed.id);
      expect(get.status).toBe(404);
      expect(await get.json()).toEqual(llmError("not_found", `No eval schedule ${doomed.id}`));
      const listed = await (await evals.list()).json();
      expect(listed.data.map((s: { id: string }) => s.id)).toEqual([clock.id]);

      await evals.untilRuns(clock.id, (r) => expect(r.length).toBeGreaterThanOrEqual(clockAtDelete + 4));
      const after = await evals.allRuns(doomed.id);
      expect(after.map((r) => r.id)).toEqual(atDelete.map((r) => r.id));
      const doneAtDelete = new Set(finished(atDelete).map((r) => r.id));
      expect(doneAtDelete.size).toBeGreaterThanOrEqual(2);
      expect(after.filter((r) => doneAtDelete.has(r.id))).toEqual(finished(atDelete));
      // A run still queued at the 200 never starts.
      for (const queued of atDelete.filter((r) => r.status === "queued")) {
        expect(after.find((r) => r.id === queued.id)).toMatchObject({ status: "failed", started_at: null });
      }
      expect((await evals.delete(clock.id)).status).toBe(200);
    });

    it("a run executing when the delete lands completes and is kept", async () => {
      const key = await stack.createKey();
      const evals = evalClient(stack, key.secret);
      const input = `held ${key.org}`;
      const heldRequests = () =>
        stack.llm.requests.filter((r) => r.body.messages[0]?.content === input).length;
      // A run of an earlier test's schedule, deleted while it ran, may still be finishing: held too, it
      // would keep the second worker from this schedule's runs.
      await untilNoEvalJobs();
      stack.llm.mode = "hold";
      let atDelete: RunJson[];
      const schedule = await evals.created({ name: "held", inputs: [input], every_seconds: 1 });
      try {
        // Both workers of the service are inside a run, waiting for the model.
        await vi.waitFor(() => expect(heldRequests()).toBe(2), { timeout: 15_000, interval: 50 });
        expect((await evals.delete(schedule.id)).status).toBe(200);
        atDelete = await evals.allRuns(schedule.id);
        expect(atDelete.map((r) => r.status)).toEqual(["running", "running"]);
      } finally {
        stack.llm.release();
      }
      const done = await evals.untilRuns(schedule.id, (r) =>
        expect(r.map((run) => run.status)).toEqual(["completed", "completed"]),
      );
      expect(done.map((r) => r.id)).toEqual(atDelete.map((r) => r.id));
      expect(done[0]!.results).toEqual([expect.objectContaining({ input, output: `Echo: ${input}` })]);
      // The workers are free again; a firing of the deleted schedule would start now.
      const clock = await evals.created({ name: "clock", inputs: ["tick"], every_seconds: 1 });
      await evals.untilRuns(clock.id, (r) => expect(finished(r).length).toBeGreaterThanOrEqual(3));
      expect(heldRequests()).toBe(2);
      expect(await evals.allRuns(schedule.id)).toHaveLength(2);
      expect((await evals.delete(clock.id)).status).toBe(200);
    });

    it("takes a 5-field cron expression in an IANA time zone, and says when it runs next", async () => {
      const key = await stack.createKey();
      const evals = evalClient(stack, key.secret);
      const res = await evals.create({
        name: "nightly",
        model: "echo-large",
        inputs: ["x"],
        cron: "30 2 * * *",
        timezone: "Europe/Paris",
      });
      expect(res.status).toBe(200);
      const schedule = await res.json();
      expect(Object.keys(schedule)).toEqual(fieldsWith("cron", "timezone"));
      const expected =
        CronExpressionParser.parse("30 2 * * *", { tz: "Europe/Paris" }).next().getTime() / 1000;
      expect(schedule).toMatchObject({
        model: "echo-large",
        cron: "30 2 * * *",
        timezone: "Europe/Paris",
        metadata: {},
      });
      expect(schedule.next_run_at).toBe(expected);
      expect((await (await evals.get(schedule.id)).json()).next_run_at).toBe(expected);
      expect(await jobScheduler(schedule.id)).toMatchObject({ pattern: "30 2 * * *", tz: "Europe/Paris" });

      const utc = await evals.created({ name: "utc", inputs: ["x"], cron: "0 * * * *" });
      expect(utc).toMatchObject({ cron: "0 * * * *", timezone: "UTC" });
      for (const id of [schedule.id, utc.id]) expect((await evals.delete(id)).status).toBe(200);
    });

    it("lists schedules and runs newest first, a page at a time", async () => {
      const key = await stack.createKey();
      const evals = evalClient(stack, key.secret);
      const ids: string[] = [];
      for (const name of ["a", "b", "c"])
        ids.push((await evals.created({ name, inputs: ["x"], cron: "0 0 1 1 *" })).id);
      const [a, b, c] = ids as [string, string, string];

      const first = await (await evals.list("?limit=2")).json();
      expect(first).toEqual({
        object: "list",
        data: [expect.objectContaining({ id: c }), expect.objectContaining({ id: b })],
        has_more: true,
      });
      expect(first.data[0]).toMatchObject({
        object: "eval.schedule",
        name: "c",
        next_run_at: expect.any(Number),
      });
      const second = await (await evals.list(`?limit=2&after=${b}`)).json();
      expect(second).toEqual({ object: "list", data: [expect.objectContaining({ id: a })], has_more: false });
      expect((await (await evals.list()).json()).data).toHaveLength(3);
      // A deleted schedule leaves the list, and still works as a cursor.
      expect((await evals.delete(b)).status).toBe(200);
      expect((await (await evals.list(`?after=${b}`)).json()).data.map((s: { id: string }) => s.id)).toEqual([
        a,
      ]);
      expect((await (await evals.list()).json()).data.map((s: { id: string }) => s.id)).toEqual([c, a]);

      const ticking = await evals.created({ name: "ticking", inputs: ["x"], every_seconds: 1 });
      await evals.untilRuns(ticking.id, (r) => expect(finished(r).length).toBeGreaterThanOrEqual(3));
      expect((await evals.delete(ticking.id)).status).toBe(200);
      const all = await evals.allRuns(ticking.id);
      const page1 = await (await evals.runs(ticking.id, "?limit=2")).json();
      expect(page1.data.map((r: RunJson) => r.id)).toEqual(all.slice(0, 2).map((r) => r.id));
      expect(page1.has_more).toBe(true);
      const page2 = await (await evals.runs(ticking.id, `?limit=100&after=${page1.data[1].id}`)).json();
      expect(page2.data.map((r: RunJson) => r.id)).toEqual(all.slice(2).map((r) => r.id));
      expect(page2.has_more).toBe(false);
      for (const id of [a, c]) expect((await evals.delete(id)).status).toBe(200);
    });

    it("counts every run's tokens in usage, under the schedule's creator and key", async () => {
      const key = await stack.createKey();
      const evals = evalClient(stack, key.secret, "carol");
      const schedule = await evals.created({
        name: "metered",
        inputs: ["one two", "three"],
        every_seconds: 1,
      });
      await evals.untilRuns(schedule.id, (r) => expect(finished(r).length).toBeGreaterThanOrEqual(2));
      expect((await evals.delete(schedule.id)).status).toBe(200);
      const runs = await evals.untilRuns(schedule.id, (r) => expect(finished(r)).toHaveLength(r.length));
      const results = runs.flatMap((r) => r.results);
      const tokens = (field: "input_tokens" | "output_tokens" | "total_tokens") =>
        results.reduce((n, r) => n + r.usage[field], 0);

      const today = utcDay(new Date());
      const usage = async (query: string) =>
        (await stack.call(key.secret, `/api/v1/usage?start=${today}${query}`)).json();
      expect((await usage("")).totals).toEqual({
        requests: results.length,
        input_tokens: tokens("input_tokens"),
        output_tokens: tokens("output_tokens"),
        total_tokens: tokens("total_tokens"),
        cost_usd: 0,
        cached_requests: 0,
      });
      expect((await usage("&group_by=user")).data).toEqual([
        expect.objectContaining({ user: "carol", requests: results.length }),
      ]);
      expect((await usage("&group_by=key")).data).toEqual([expect.objectContaining({ key_id: key.id })]);
      expect((await usage("&group_by=model")).data).toEqual([
        expect.objectContaining({ model: "echo-small-2026-01-01" }),
      ]);
    });

    it("exports runs by outcome, run durations and queue depth, without ids in labels", async () => {
      const metrics = async () => (await fetch(`${stack.serviceUrl}/metrics`)).text();
      const count = (text: string, name: string) =>
        Number(new RegExp(`^${name}\\{outcome="completed"\\} (\\d+)`, "m").exec(text)?.[1] ?? 0);
      const before = await metrics();
      // This test's own run, so it does not depend on what earlier tests ran.
      const key = await stack.createKey();
      const evals = evalClient(stack, key.secret);
      const schedule = await evals.created({ name: "measured", inputs: ["x"], every_seconds: 1 });
      await evals.untilRuns(schedule.id, (r) => expect(r.map((run) => run.status)).toContain("completed"));
      expect((await evals.delete(schedule.id)).status).toBe(200);
      let text = "";
      await vi.waitFor(
        async () => {
          text = await metrics();
          for (const name of ["service_eval_runs_total", "service_eval_run_duration_seconds_count"])
            expect(count(text, name)).toBeGreaterThan(count(before, name));
        },
        { timeout: 10_000 },
      );
      for (const state of ["waiting", "active", "delayed"]) {
        expect(text).toMatch(new RegExp(`^service_eval_queue_jobs\\{state="${state}"\\} \\d+`, "m"));
      }
      expect(text).not.toMatch(/"eval_(sched|run)_/);
    });

    it("keeps only the queue in Redis, every key of it in one Redis Cluster slot; schedules and runs are in PostgreSQL", async () => {
      const key = await stack.createKey();
      const evals = evalClient(stack, key.secret);
      const schedule = await evals.created({ name: "placed", inputs: ["x"], cron: "0 0 1 1 *" });
      const keys = await scanKeys(stack.redis, "*eval*");
      expect(keys.length).toBeGreaterThan(0);
      for (const k of keys) expect(k).toMatch(/^gw:\{evals\}:eval-runs:/);
      const db = createPostgres(stack.database.url, { connectionName: "test" });
      try {
        const { rows } = await db.query<{ n: string }>(
          "SELECT count(*) AS n FROM eval_schedules WHERE id = $1",
          [schedule.id],
        );
        expect(Number(rows[0]!.n)).toBe(1);
      } finally {
        await db.close();
      }
      expect((await evals.delete(schedule.id)).status).toBe(200);
    });
  });
});
