import { notFound } from "@gw/core/errors";
import { defineRoute } from "@gw/core/http";
import { deletedSchema } from "@gw/core/openapi";
import { ownViewOf } from "@gw/core/permissions";
import { ok } from "../../http/schemas.ts";
import { unixSeconds } from "../records.ts";
import { type EvalRouteDeps, scheduleIdParams, TAG } from "./params.ts";

/**
 * `DELETE /api/v1/llm/evals/schedules/{schedule_id}` (API reference §4.6, docs/api/README.md): a soft
 * delete. The record is marked in one atomic step that also checks it exists
 * and is not deleted yet (two racing deletes: one 200, one 404); its job
 * scheduler is gone before the answer, and workers drop its already-queued
 * firings and runs. Runs already executing finish; every run stays readable.
 * An end user deletes only its own schedules (another's is 404).
 */
export const deleteSchedule = defineRoute({
  method: "DELETE",
  path: "/api/v1/llm/evals/schedules/:schedule_id",
  operationId: "deleteEvalSchedule",
  summary: "Soft-delete a schedule; its runs stay readable",
  tag: TAG,
  permission: "evals:write",
  params: scheduleIdParams,
  responses: ok("Deleted", deletedSchema("eval.schedule.deleted")),
  errors: ["not_found"],
  handler: async ({ principal, params }, deps: Pick<EvalRouteDeps, "evals">) => {
    const id = params.schedule_id;
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
    return { id, object: "eval.schedule.deleted", deleted: true };
  },
});
