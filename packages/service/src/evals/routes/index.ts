import { createSchedule } from "./create-schedule.ts";
import { deleteSchedule } from "./delete-schedule.ts";
import { getSchedule } from "./get-schedule.ts";
import { listRuns } from "./list-runs.ts";
import { listSchedules } from "./list-schedules.ts";

export type { EvalRouteDeps } from "./params.ts";

/** The eval schedule routes: create, list, get, runs, delete. */
export const evalRoutes = [createSchedule, listSchedules, getSchedule, listRuns, deleteSchedule];
