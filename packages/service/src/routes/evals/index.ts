import type { Router } from "express";
import type { EvalRouteDeps } from "./create-schedule.ts";
import { registerCreateSchedule } from "./create-schedule.ts";
import { registerDeleteSchedule } from "./delete-schedule.ts";
import { registerGetSchedule } from "./get-schedule.ts";
import { registerListRuns } from "./list-runs.ts";
import { registerListSchedules } from "./list-schedules.ts";

/** The eval schedule routes: create, list, get, runs, delete. */
export function registerEvalRoutes(router: Router, deps: EvalRouteDeps): void {
  registerCreateSchedule(router, deps);
  registerListSchedules(router, deps);
  registerGetSchedule(router, deps);
  registerListRuns(router, deps);
  registerDeleteSchedule(router, deps);
}
