import { conflict, ValidationFailed } from "@gw/core/errors";
import { defineRoute } from "@gw/core/http";
import { CronExpressionParser } from "cron-parser";
import { z } from "zod";
import { metadataSchema } from "../../conversations/metadata.ts";
import { ok } from "../../http/schemas.ts";
import { modelName, requireMode, requireUsableModel } from "../../llm/models.ts";
import { chosen } from "../../schema.ts";
import {
  type Cadence,
  type EvalInput,
  type EvalSchedule,
  newEvalId,
  SCHEDULE_PREFIX,
  scheduleObject,
  unixSeconds,
} from "../records.ts";
import { type EvalRouteDeps, schedule as scheduleSchema, TAG } from "./params.ts";

/** Longest period: a year. Longer cadences are cron expressions. */
const MAX_EVERY_SECONDS = 365 * 86_400;
const MAX_INPUT_CHARS = 32_000;

const text = z.string().min(1).max(MAX_INPUT_CHARS);
const inputObject = z.strictObject({ input: text, expected: text });

/** A string, or `{input, expected}`: judged by its shape, so a problem is reported inside the form it resembles. */
const evalInput = chosen(
  (value): z.ZodType<EvalInput> =>
    typeof value === "object" && value !== null && !Array.isArray(value) ? inputObject : text,
);

/**
 * Five fields (minute hour day-of-month month day-of-week), as cron-parser
 * (BullMQ's own) reads them, firing no closer together than `minInterval` seconds.
 */
const cronOf = (minInterval: number) =>
  z.string().superRefine((expression, ctx) => {
    const problem = cronProblem(expression, minInterval);
    if (problem) ctx.addIssue({ code: "custom", message: problem, input: expression });
  });

function cronProblem(expression: string, minInterval: number): string | undefined {
  if (expression.trim().split(/\s+/).length !== 5) {
    return "Should be a cron expression of 5 fields: minute hour day-of-month month day-of-week";
  }
  let gap: number;
  try {
    const parsed = CronExpressionParser.parse(expression, { tz: "UTC" });
    parsed.next();
    gap = smallestDailyGapSeconds(parsed.fields.minute.values, parsed.fields.hour.values);
  } catch (err) {
    return `Invalid cron expression: ${(err as Error).message}`;
  }
  if (gap < minInterval) {
    return `Should fire at most every ${minInterval} seconds, the smallest interval allowed; this fires ${gap} seconds apart`;
  }
  return undefined;
}

/**
 * The smallest gap between two firings of a day's times (every hour with
 * every minute), counting the night as if the next day fired too: exact for
 * a cron that fires daily, on the safe side for one that does not.
 */
function smallestDailyGapSeconds(minutes: readonly number[], hours: readonly number[]): number {
  const times = hours.flatMap((h) => minutes.map((m) => h * 60 + m)).sort((a, b) => a - b);
  let gap = 1440 - times.at(-1)! + times[0]!;
  for (let i = 1; i < times.length; i++) gap = Math.min(gap, times[i]! - times[i - 1]!);
  return gap * 60;
}

/** An IANA time zone name that this runtime knows (`Europe/Paris`, `UTC`); offsets like `+01:00` are not names. */
const timezone = z.string().superRefine((name, ctx) => {
  let known = /^[A-Za-z][A-Za-z0-9_+-]*(\/[A-Za-z0-9_+-]+)*$/.test(name);
  try {
    new Intl.DateTimeFormat("en-US", { timeZone: name });
  } catch {
    known = false;
  }
  if (!known) {
    ctx.addIssue({
      code: "custom",
      message: "Should be an IANA time zone name, like Europe/Paris",
      input: name,
    });
  }
});

/** The create body; periods shorter than `minInterval` seconds are refused (422 at their `loc`). */
export const createScheduleBodyOf = (minInterval: number) =>
  z
    .strictObject({
      name: z.string().min(1).max(200),
      model: modelName,
      inputs: z.array(evalInput).min(1).max(100),
      every_seconds: z.int().min(minInterval).max(MAX_EVERY_SECONDS).optional(),
      cron: cronOf(minInterval).optional(),
      timezone: timezone.optional(),
      metadata: metadataSchema.optional(),
    })
    .superRefine((b, ctx) => {
      if ((b.every_seconds === undefined) === (b.cron === undefined)) {
        ctx.addIssue({
          code: "custom",
          path: [],
          message: "Exactly one of 'every_seconds' and 'cron' should be given",
        });
      } else if (b.timezone !== undefined && b.cron === undefined) {
        ctx.addIssue({
          code: "custom",
          path: ["timezone"],
          message: "'timezone' applies only to a 'cron' schedule",
          input: b.timezone,
        });
      }
    });

/**
 * `POST /api/v1/llm/evals/schedules` → 200 the schedule. Its job scheduler is
 * in the queue before the answer; the first run of an `every_seconds`
 * schedule is queued at once. An organization at its cap of live schedules
 * gets 409; a period under the smallest interval, 422; a model the key may
 * not use, 403 (runs are admitted as the creator's key stands at each run:
 * `evals/execute-run.ts`).
 */
export const createSchedule = defineRoute({
  method: "POST",
  path: "/api/v1/llm/evals/schedules",
  operationId: "createEvalSchedule",
  summary: "Create an eval schedule: `every_seconds` or a `cron` expression",
  tag: TAG,
  permission: "evals:write",
  // As at the default EVAL_MIN_INTERVAL_SECONDS; a deployment may set another smallest period.
  body: createScheduleBodyOf(60),
  bodyValidation: {
    schemaFor: (deps: EvalRouteDeps) => createScheduleBodyOf(deps.evals.limits.minIntervalSeconds),
  },
  responses: ok("The schedule", scheduleSchema),
  errors: ["bad_request", "conflict"],
  handler: async ({ principal, body: input }, deps: EvalRouteDeps) => {
    const { maxSchedulesPerOrg } = deps.evals.limits;
    if (input.model !== "auto" && !deps.provider.resolveModel(input.model)) {
      const expected = ["auto", ...(deps.provider.allowedModels ?? [])].join(", ");
      throw new ValidationFailed([
        {
          loc: ["body", "model"],
          msg: "Input should be 'auto' or one of the allowed models",
          type: "enum",
          input: input.model,
          ctx: { expected },
        },
      ]);
    }
    // As `/responses` does: 400 for an embedding model, 403 for a model the key may not use (`auto`: the
    // default model); checked again at every run.
    const model = input.model === "auto" ? deps.provider.defaultModel : input.model;
    if (model) {
      requireMode(deps.provider, model, "chat");
      requireUsableModel(principal, model);
    }
    const cadence: Cadence =
      input.cron === undefined
        ? { every_seconds: input.every_seconds! }
        : { cron: input.cron, timezone: input.timezone ?? "UTC" };
    const schedule: EvalSchedule = {
      id: newEvalId(SCHEDULE_PREFIX),
      name: input.name,
      model: input.model,
      inputs: input.inputs,
      cadence,
      created_at: unixSeconds(deps.evals.clock.wall()),
      metadata: input.metadata ?? {},
      creator: { user: principal.user, keyId: principal.keyId },
      deleted_at: null,
    };
    if (!(await deps.evals.store.createWithinCap(principal.org, schedule, maxSchedulesPerOrg))) {
      throw conflict(
        `The organization has ${maxSchedulesPerOrg} eval schedules, the most allowed; delete one before creating another`,
      );
    }
    let next: number | undefined;
    try {
      next = await deps.evals.queue.schedule(principal.org, schedule.id, cadence);
    } catch (err) {
      await deps.evals.store.remove(principal.org, schedule.id).catch(() => undefined);
      throw err;
    }
    return scheduleObject(schedule, next);
  },
});
