import { ValidationFailed } from "@gw/core/errors";
import { type JsonSchema, objectSchema, stringSchema } from "@gw/core/openapi";
import { ownViewOf } from "@gw/core/permissions";
import type { Principal } from "@gw/core/principal";
import { queryInt } from "@gw/core/validation";
import { z } from "zod";
import { metadata, nullable, unixTime } from "../../http/schemas.ts";
import type { ChatProvider } from "../../llm/provider.ts";
import type { Evals } from "../index.ts";
import { type EvalSchedule, SCHEDULE_PREFIX } from "../records.ts";
import type { EvalStore } from "../store.ts";

/** What the eval schedule routes need. */
export interface EvalRouteDeps {
  evals: Evals;
  provider: ChatProvider;
}

export const TAG = "Evals";

const SCHEDULE_ID = new RegExp(`^${SCHEDULE_PREFIX}[A-Za-z0-9_-]{1,64}$`);

/** `{schedule_id}` in a path: an `eval_sched_…` id. */
export const scheduleIdParams = z.object({
  schedule_id: z.string().regex(SCHEDULE_ID, `String should match pattern '${SCHEDULE_ID.source}'`),
});

/** `limit` (1 to 100, default 20) and `after` (the id of the last item of the previous page). */
export const pageQuery = z.object({
  limit: queryInt(z.int().min(1).max(100)).default(20),
  after: z.string().min(1).max(128).optional(),
});

export const listOf = <T>(page: { data: T[]; has_more: boolean }) => ({
  object: "list" as const,
  data: page.data,
  has_more: page.has_more,
});

/** 422 for an `after` that names nothing in the list. */
export const unknownCursor = (after: string | undefined) =>
  new ValidationFailed([
    {
      loc: ["query", "after"],
      msg: "Should be the id of an item in this list",
      type: "value_error",
      input: after,
    },
  ]);

/**
 * The schedule, deleted or not, if the principal may see it: any of its
 * organization's, or for an end user (see `ownViewOf`) only one it created;
 * `undefined` otherwise, answered as a schedule that does not exist.
 */
export async function visibleSchedule(
  store: EvalStore,
  principal: Principal,
  id: string,
): Promise<EvalSchedule | undefined> {
  const schedule = await store.get(principal.org, id);
  const own = ownViewOf(principal);
  return schedule && (own === undefined || schedule.creator.user === own) ? schedule : undefined;
}

/** An eval list object, as the OpenAPI document shows it. */
export const evalList = (items: JsonSchema) =>
  objectSchema({
    object: { type: "string", const: "list" },
    data: { type: "array", items },
    has_more: { type: "boolean" },
  });

export const schedule = objectSchema(
  {
    id: stringSchema("`eval_sched_…`"),
    object: { type: "string", const: "eval.schedule" },
    name: stringSchema(),
    model: stringSchema(),
    inputs: { type: "array", items: {} },
    every_seconds: { type: "integer" },
    cron: stringSchema(),
    timezone: stringSchema(),
    created_at: unixTime,
    next_run_at: { type: ["integer", "null"], description: "Unix time, in seconds" },
    metadata,
  },
  { optional: ["every_seconds", "cron", "timezone"] },
);

export const run = objectSchema(
  {
    id: stringSchema(),
    object: { type: "string", const: "eval.run" },
    schedule_id: stringSchema(),
    status: { enum: ["queued", "running", "completed", "failed"] },
    model: {
      ...nullable("string"),
      description: "The model asked for (`auto` resolved); null until resolved",
    },
    created_at: unixTime,
    started_at: nullable("integer"),
    completed_at: nullable("integer"),
    error: nullable("string"),
    results: { type: "array", items: { type: "object" } },
    usage: { type: "object" },
  },
  { open: true },
);
