import { notFound } from "@gw/core/errors";
import { defineRoute } from "@gw/core/http";
import { ok } from "../../http/schemas.ts";
import { runObject } from "../records.ts";
import {
  type EvalRouteDeps,
  evalList,
  listOf,
  pageQuery,
  run,
  scheduleIdParams,
  TAG,
  unknownCursor,
  visibleSchedule,
} from "./params.ts";

/**
 * `GET /api/v1/llm/evals/schedules/{schedule_id}/runs?limit&after`: the
 * schedule's runs, newest first; still answered after the schedule is
 * deleted. An end user sees the runs of its own schedules only.
 */
export const listRuns = defineRoute({
  method: "GET",
  path: "/api/v1/llm/evals/schedules/:schedule_id/runs",
  operationId: "listEvalRuns",
  summary: "A schedule's runs, newest first; still answered after it is deleted",
  tag: TAG,
  permission: "evals:read",
  params: scheduleIdParams,
  query: pageQuery,
  responses: ok("A page of runs", evalList(run)),
  errors: ["not_found"],
  handler: async ({ principal, params, query }, deps: Pick<EvalRouteDeps, "evals">) => {
    const id = params.schedule_id;
    if (!(await visibleSchedule(deps.evals.store, principal, id))) throw notFound(`No eval schedule ${id}`);
    const page = await deps.evals.store.runs(principal.org, id, query.limit, query.after);
    if (!page) throw unknownCursor(query.after);
    return listOf({ ...page, data: page.data.map(runObject) });
  },
});
