import { expectJsonError } from "@gw/test-kit";
import { describe, expect, it } from "vitest";
import { evalClient } from "../../../test/evals-client.ts";
import { llmError, useStack } from "../../../test/stack.ts";

const stack = useStack({ EVAL_MAX_SCHEDULES_PER_ORG: "3", EVAL_MIN_INTERVAL_SECONDS: "300" });
// Never fires while the test runs.
const yearly = (name: string) => ({ name, inputs: ["x"], cron: "0 0 1 1 *" });

describe("per-organization limits on eval schedules", () => {
  it("refuses a period under EVAL_MIN_INTERVAL_SECONDS with 422 at its loc, naming the smallest allowed", async () => {
    const evals = evalClient(stack, (await stack.createKey()).secret);
    const short = await evals.create({ name: "n", inputs: ["x"], every_seconds: 299 });
    expect((await expectJsonError(short, 422)).detail).toEqual([
      {
        loc: ["body", "every_seconds"],
        msg: "Input should be greater than or equal to 300",
        type: "greater_than_equal",
        input: 299,
        ctx: { ge: 300 },
      },
    ]);
    // A cron expression's firings count too: every 2 minutes is 120 seconds apart, every 5 is enough.
    const cron = await evals.create({ name: "n", inputs: ["x"], cron: "*/2 * * * *" });
    expect((await expectJsonError(cron, 422)).detail).toEqual([
      expect.objectContaining({
        loc: ["body", "cron"],
        type: "value_error",
        msg: expect.stringMatching(/at most every 300 seconds.* 120 seconds apart/),
      }),
    ]);
    // Judged over a day: 23:58 and the next day's 00:00 are two minutes apart.
    expect((await evals.create({ name: "n", inputs: ["x"], cron: "0,58 0,23 * * *" })).status).toBe(422);
    for (const ok of [
      { name: "n", inputs: ["x"], every_seconds: 300 },
      { name: "n", inputs: ["x"], cron: "*/5 * * * *" },
      { name: "n", inputs: ["x"], cron: "58 23 * * *", timezone: "Europe/Paris" },
    ]) {
      expect((await evals.create(ok)).status).toBe(200);
    }
  });

  it("of ten creates at once under a cap of 3, three get 200 and seven 409 naming the cap", async () => {
    const key = await stack.createKey();
    const evals = evalClient(stack, key.secret);
    const answers = await Promise.all(Array.from({ length: 10 }, (_, i) => evals.create(yearly(`s${i}`))));
    expect(answers.map((r) => r.status).sort()).toEqual([200, 200, 200, 409, 409, 409, 409, 409, 409, 409]);
    for (const refused of answers.filter((r) => r.status === 409)) {
      expect(await expectJsonError(refused, 409)).toEqual(
        llmError(
          "conflict",
          "The organization has 3 eval schedules, the most allowed; delete one before creating another",
        ),
      );
    }
    const listed = (await (await evals.list()).json()).data as { id: string }[];
    expect(listed).toHaveLength(3);

    // A deleted schedule frees its place; other organizations have their own.
    expect((await evals.create(yearly("more"))).status).toBe(409);
    const other = evalClient(stack, (await stack.createKey()).secret);
    expect((await other.create(yearly("theirs"))).status).toBe(200);
    expect((await evals.delete(listed[0]!.id)).status).toBe(200);
    expect((await evals.create(yearly("again"))).status).toBe(200);
    expect((await evals.create(yearly("over"))).status).toBe(409);
  });
});
