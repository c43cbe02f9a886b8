import { principalOf, requirePermission } from "@gw/core/http";
import { ownViewOf } from "@gw/core/permissions";
import { validate } from "@gw/core/validation";
import type { Router } from "express";
import { scheduleObject } from "../../evals/records.ts";
import type { EvalRouteDeps } from "./create-schedule.ts";
import { listOf, pageQuery, unknownCursor } from "./params.ts";

/**
 * `GET /api/v1/llm/evals/schedules?limit&after`: the organization's live
 * schedules, newest first; an end user's own only (see `ownViewOf`).
 */
export function registerListSchedules(router: Router, deps: Pick<EvalRouteDeps, "evals">): void {
  router.get("/llm/evals/schedules", requirePermission("evals:read"), async (req, res) => {
    const query = validate("query", pageQuery, req.query);
    const principal = principalOf(res);
    const page = await deps.evals.store.list(principal.org, query.limit, query.after, ownViewOf(principal));
    if (!page) throw unknownCursor(query.after);
    const next = await deps.evals.queue.nextRuns(page.data.map((s) => s.id));
    res.json(listOf({ ...page, data: page.data.map((s) => scheduleObject(s, next.get(s.id))) }));
  });
}
