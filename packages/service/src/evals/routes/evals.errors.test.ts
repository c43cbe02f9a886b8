import { describe, expect, it } from "vitest";
import { evalClient, finished, SCHEDULES } from "../../../test/evals-client.ts";
import { llmError, useStack } from "../../../test/stack.ts";

// No model provider: runs must fail saying what to configure. LLM_MODELS limits what a schedule may ask for.
const stack = useStack({ LLM_BASE_URL: "", LLM_MODELS: "echo-small" });

const valid = { name: "n", inputs: ["x"], every_seconds: 60 };
const summary = async (res: Response) =>
  (await res.json()).detail.map(
    (d: { loc: (string | number)[]; type: string }) => `${d.loc.join(".")}:${d.type}`,
  );

describe("eval schedule errors", () => {
  it.each([
    ["no name", { ...valid, name: undefined }, ["body.name:missing"]],
    ["empty name", { ...valid, name: "" }, ["body.name:string_too_short"]],
    ["name over 200", { ...valid, name: "n".repeat(201) }, ["body.name:string_too_long"]],
    ["no inputs", { ...valid, inputs: [] }, ["body.inputs:too_short"]],
    ["101 inputs", { ...valid, inputs: Array(101).fill("x") }, ["body.inputs:too_long"]],
    ["an input over 32000", { ...valid, inputs: ["x".repeat(32_001)] }, ["body.inputs.0:string_too_long"]],
    ["an empty input", { ...valid, inputs: ["ok", ""] }, ["body.inputs.1:string_too_short"]],
    [
      "an object input without expected",
      { ...valid, inputs: [{ input: "x" }] },
      ["body.inputs.0.expected:missing"],
    ],
    [
      "an object input with an extra field",
      { ...valid, inputs: [{ input: "x", expected: "y", weight: 2 }] },
      ["body.inputs.0.weight:extra_forbidden"],
    ],
    ["a number input", { ...valid, inputs: [7] }, ["body.inputs.0:string_type"]],
    ["every_seconds 0", { ...valid, every_seconds: 0 }, ["body.every_seconds:greater_than_equal"]],
    ["a fractional every_seconds", { ...valid, every_seconds: 1.5 }, ["body.every_seconds:int_type"]],
    ["neither every_seconds nor cron", { name: "n", inputs: ["x"] }, ["body:value_error"]],
    ["both every_seconds and cron", { ...valid, cron: "* * * * *" }, ["body:value_error"]],
    ["a 6-field cron", { name: "n", inputs: ["x"], cron: "0 * * * * *" }, ["body.cron:value_error"]],
    [
      "a cron field out of range",
      { name: "n", inputs: ["x"], cron: "61 * * * *" },
      ["body.cron:value_error"],
    ],
    ["a cron that never fires", { name: "n", inputs: ["x"], cron: "0 0 31 2 *" }, ["body.cron:value_error"]],
    [
      "an unknown time zone",
      { name: "n", inputs: ["x"], cron: "0 * * * *", timezone: "Mars/Olympus" },
      ["body.timezone:value_error"],
    ],
    [
      "an offset as time zone",
      { name: "n", inputs: ["x"], cron: "0 * * * *", timezone: "+01:00" },
      ["body.timezone:value_error"],
    ],
    ["a time zone without cron", { ...valid, timezone: "UTC" }, ["body.timezone:value_error"]],
    ["a model outside LLM_MODELS", { ...valid, model: "gpt-9" }, ["body.model:enum"]],
    [
      "a metadata value that is not a string",
      { ...valid, metadata: { a: 1 } },
      ["body.metadata.a:string_type"],
    ],
    ["an unknown field", { ...valid, owner: "bob" }, ["body.owner:extra_forbidden"]],
    [
      "several problems at once",
      { name: "", inputs: [], cron: "nope" },
      ["body.name:string_too_short", "body.inputs:too_short", "body.cron:value_error"],
    ],
  ])("refuses %s with 422", async (_label, body, expected) => {
    const key = await stack.createKey();
    const res = await evalClient(stack, key.secret).create(body);
    expect(res.status).toBe(422);
    expect(await summary(res)).toEqual(expected);
  });

  it("says what is wrong with a cron expression or time zone, at its location", async () => {
    const key = await stack.createKey();
    const res = await evalClient(stack, key.secret).create({
      name: "n",
      inputs: ["x"],
      cron: "61 * * * *",
      timezone: "Mars/Olympus",
    });
    expect((await res.json()).detail).toEqual([
      {
        loc: ["body", "cron"],
        msg: expect.stringContaining("Invalid cron expression"),
        type: "value_error",
        input: "61 * * * *",
      },
      {
        loc: ["body", "timezone"],
        msg: "Should be an IANA time zone name, like Europe/Paris",
        type: "value_error",
        input: "Mars/Olympus",
      },
    ]);
  });

  it("refuses a body that is not JSON, or empty", async () => {
    const key = await stack.createKey();
    const post = (body: string) =>
      fetch(`${stack.gatewayUrl}${SCHEDULES}`, {
        method: "POST",
        headers: { authorization: `Bearer ${key.secret}`, "content-type": "application/json" },
        body,
      });
    expect(await summary(await post("{nope"))).toEqual(["body:json_invalid"]);
    expect(await summary(await post(""))).toEqual(["body.name:missing", "body.inputs:missing"]);
  });

  it("answers 422 at path.schedule_id for an id without the eval_sched_ prefix", async () => {
    const key = await stack.createKey();
    const evals = evalClient(stack, key.secret);
    for (const res of [
      await evals.delete("sched_123"),
      await evals.get("conv_123"),
      await evals.runs("123"),
      await evals.delete("eval_sched_"),
    ]) {
      expect(res.status).toBe(422);
      const detail = (await res.json()).detail;
      expect(detail).toEqual([
        expect.objectContaining({ loc: ["path", "schedule_id"], type: "string_pattern_mismatch" }),
      ]);
    }
  });

  it("answers 404 in JSON for an unknown id, and for a second delete", async () => {
    const key = await stack.createKey();
    const evals = evalClient(stack, key.secret);
    const unknown = "eval_sched_doesNotExist0000000000";
    for (const res of [await evals.get(unknown), await evals.runs(unknown), await evals.delete(unknown)]) {
      expect(res.status).toBe(404);
      expect(await res.json()).toEqual(llmError("not_found", `No eval schedule ${unknown}`));
    }
    const schedule = await evals.created(valid);
    expect((await evals.delete(schedule.id)).status).toBe(200);
    const again = await evals.delete(schedule.id);
    expect(again.status).toBe(404);
    expect(await again.json()).toEqual(llmError("not_found", `No eval schedule ${schedule.id}`));
  });

  it("answers one 200 and otherwise 404 when deletes race", async () => {
    const key = await stack.createKey();
    const evals = evalClient(stack, key.secret);
    const schedule = await evals.created(valid);
    const statuses = await Promise.all(
      [1, 2, 3, 4].map(() => evals.delete(schedule.id).then((r) => r.status)),
    );
    expect(statuses.sort()).toEqual([200, 404, 404, 404]);
  });

  it.each([
    ["?limit=0", "query.limit:greater_than_equal"],
    ["?limit=101", "query.limit:less_than_equal"],
    ["?limit=many", "query.limit:int_type"],
    ["?after=eval_sched_unknown", "query.after:value_error"],
  ])("validates the list query %s", async (query, expected) => {
    const key = await stack.createKey();
    const evals = evalClient(stack, key.secret);
    const schedule = await evals.created(valid);
    expect(await summary(await evals.list(query))).toEqual([expected]);
    const runs = await evals.runs(schedule.id, query.replace("eval_sched_", "eval_run_"));
    expect(runs.status).toBe(422);
    expect(await summary(runs)).toEqual([expected]);
    expect((await evals.delete(schedule.id)).status).toBe(200);
  });

  it("a run without a configured model provider fails, naming LLM_BASE_URL", async () => {
    const key = await stack.createKey();
    const evals = evalClient(stack, key.secret);
    const schedule = await evals.created({ name: "n", inputs: ["x"], every_seconds: 1 });
    const runs = await evals.untilRuns(schedule.id, (r) => expect(finished(r).length).toBeGreaterThan(0));
    expect((await evals.delete(schedule.id)).status).toBe(200);
    expect(finished(runs)[0]).toMatchObject({
      status: "failed",
      error: expect.stringContaining("LLM_BASE_URL"),
      results: [],
      completed_at: expect.any(Number),
    });
  });
});
