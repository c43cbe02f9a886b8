import { notFound } from "@gw/core/errors";
import { principalOf, requirePermission } from "@gw/core/http";
import { validate } from "@gw/core/validation";
import type { Router } from "express";
import { runObject } from "../../evals/records.ts";
import type { EvalRouteDeps } from "./create-schedule.ts";
import { listOf, pageQuery, scheduleIdParams, unknownCursor, visibleSchedule } from "./params.ts";

/**
 * `GET /api/v1/llm/evals/schedules/{schedule_id}/runs?limit&after`: the
 * schedule's runs, newest first; still answered after the schedule is
 * deleted. An end user sees the runs of its own schedules only.
 */
export function registerListRuns(router: Router, deps: Pick<EvalRouteDeps, "evals">): void {
  router.get("/llm/evals/schedules/:schedule_id/runs", requirePermission("evals:read"), async (req, res) => {
    const { schedule_id: id } = validate("path", scheduleIdParams, req.params);
    const query = validate("query", pageQuery, req.query);
    const principal = principalOf(res);
    const org = principal.org;
    if (!(await visibleSchedule(deps.evals.store, principal, id))) throw notFound(`No eval schedule ${id}`);
    const page = await deps.evals.store.runs(org, id, query.limit, query.after);
    if (!page) throw unknownCursor(query.after);
    res.json(listOf({ ...page, data: page.data.map(runObject) }));
  });
}
