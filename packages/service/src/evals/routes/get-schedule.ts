import { notFound } from "@gw/core/errors";
import { defineRoute } from "@gw/core/http";
import { ok } from "../../http/schemas.ts";
import { scheduleObject } from "../records.ts";
import {
  type EvalRouteDeps,
  scheduleIdParams,
  schedule as scheduleSchema,
  TAG,
  visibleSchedule,
} from "./params.ts";

/** `GET /api/v1/llm/evals/schedules/{schedule_id}`: a live schedule of the caller's organization (an end user's own). */
export const getSchedule = defineRoute({
  method: "GET",
  path: "/api/v1/llm/evals/schedules/:schedule_id",
  operationId: "getEvalSchedule",
  summary: "A live schedule",
  tag: TAG,
  permission: "evals:read",
  params: scheduleIdParams,
  responses: ok("The schedule", scheduleSchema),
  errors: ["not_found"],
  handler: async ({ principal, params }, deps: Pick<EvalRouteDeps, "evals">) => {
    const id = params.schedule_id;
    const schedule = await visibleSchedule(deps.evals.store, principal, id);
    if (!schedule || schedule.deleted_at !== null) throw notFound(`No eval schedule ${id}`);
    const next = await deps.evals.queue.nextRuns([id]);
    return scheduleObject(schedule, next.get(id));
  },
});
