import { defineRoute } from "@gw/core/http";
import { ownViewOf } from "@gw/core/permissions";
import { ok } from "../../http/schemas.ts";
import { scheduleObject } from "../records.ts";
import { type EvalRouteDeps, evalList, listOf, pageQuery, schedule, TAG, unknownCursor } from "./params.ts";

/**
 * `GET /api/v1/llm/evals/schedules?limit&after`: the organization's live
 * schedules, newest first; an end user's own only (see `ownViewOf`).
 */
export const listSchedules = defineRoute({
  method: "GET",
  path: "/api/v1/llm/evals/schedules",
  operationId: "listEvalSchedules",
  summary: "The organization's live schedules, newest first",
  tag: TAG,
  permission: "evals:read",
  query: pageQuery,
  responses: ok("A page of schedules", evalList(schedule)),
  handler: async ({ principal, query }, deps: Pick<EvalRouteDeps, "evals">) => {
    const page = await deps.evals.store.list(principal.org, query.limit, query.after, ownViewOf(principal));
    if (!page) throw unknownCursor(query.after);
    const next = await deps.evals.queue.nextRuns(page.data.map((s) => s.id));
    return listOf({ ...page, data: page.data.map((s) => scheduleObject(s, next.get(s.id))) });
  },
});
