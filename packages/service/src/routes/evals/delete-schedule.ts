import { notFound } from "@gw/core/errors";
import { principalOf, requirePermission } from "@gw/core/http";
import { ownViewOf } from "@gw/core/permissions";
import { validate } from "@gw/core/validation";
import type { Router } from "express";
import { unixSeconds } from "../../evals/records.ts";
import type { EvalRouteDeps } from "./create-schedule.ts";
import { scheduleIdParams } from "./params.ts";

/**
 * `DELETE /api/v1/llm/evals/schedules/{schedule_id}` (API reference §4.6, docs/api/README.md): a soft
 * delete. The record is marked in one atomic step that also checks it exists
 * and is not deleted yet (two racing deletes: one 200, one 404); its job
 * scheduler is gone before the answer, and workers drop its already-queued
 * firings and runs. Runs already executing finish; every run stays readable.
 * An end user deletes only its own schedules (another's is 404).
 */
export function registerDeleteSchedule(router: Router, deps: Pick<EvalRouteDeps, "evals">): void {
  router.delete("/llm/evals/schedules/:schedule_id", requirePermission("evals:write"), async (req, res) => {
    const { schedule_id: id } = validate("path", scheduleIdParams, req.params);
    const principal = principalOf(res);
    if (
      !(await deps.evals.store.softDelete(
        principal.org,
        id,
        unixSeconds(deps.evals.clock.wall()),
        ownViewOf(principal),
      ))
    ) {
      throw notFound(`No eval schedule ${id}`);
    }
    await deps.evals.queue.unschedule(id);
    res.json({ id, object: "eval.schedule.deleted", deleted: true });
  });
}
