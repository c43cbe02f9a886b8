import { notFound } from "@gw/core/errors";
import { principalOf, requirePermission } from "@gw/core/http";
import { validate } from "@gw/core/validation";
import type { Router } from "express";
import { scheduleObject } from "../../evals/records.ts";
import type { EvalRouteDeps } from "./create-schedule.ts";
import { scheduleIdParams, visibleSchedule } from "./params.ts";

/** `GET /api/v1/llm/evals/schedules/{schedule_id}`: a live schedule of the caller's organization (an end user's own). */
export function registerGetSchedule(router: Router, deps: Pick<EvalRouteDeps, "evals">): void {
  router.get("/llm/evals/schedules/:schedule_id", requirePermission("evals:read"), async (req, res) => {
    const { schedule_id: id } = validate("path", scheduleIdParams, req.params);
    const schedule = await visibleSchedule(deps.evals.store, principalOf(res), id);
    if (!schedule || schedule.deleted_at !== null) throw notFound(`No eval schedule ${id}`);
    const next = await deps.evals.queue.nextRuns([id]);
    res.json(scheduleObject(schedule, next.get(id)));
  });
}
