import { randomBytes } from "node:crypto";
import type { Usage } from "../llm/provider.ts";

export const SCHEDULE_PREFIX = "eval_sched_";
export const RUN_PREFIX = "eval_run_";

/** 128 random bits, base64url: unguessable and safe in URLs and Redis keys. */
export const newEvalId = (prefix: typeof SCHEDULE_PREFIX | typeof RUN_PREFIX) =>
  `${prefix}${randomBytes(16).toString("base64url")}`;

export type EvalInput = string | { input: string; expected: string };

/** When a schedule fires: a fixed period, or a 5-field cron expression in an IANA time zone. */
export type Cadence = { every_seconds: number } | { cron: string; timezone: string };

/** A schedule as stored: what the caller gave, and who created it (usage is counted under them). */
export interface EvalSchedule {
  id: string;
  name: string;
  model: string;
  inputs: EvalInput[];
  cadence: Cadence;
  created_at: number;
  metadata: Record<string, string>;
  creator: { user: string; keyId: string };
  /** Unix seconds; set once by the soft delete. */
  deleted_at: number | null;
}

export type RunStatus = "queued" | "running" | "completed" | "failed";

export interface EvalResult {
  input: string;
  expected: string | null;
  output: string;
  /** Whether the output contains `expected`; null when no expectation was given. */
  passed: boolean | null;
  usage: Usage;
}

export interface EvalRun {
  id: string;
  schedule_id: string;
  status: RunStatus;
  model: string | null;
  created_at: number;
  started_at: number | null;
  completed_at: number | null;
  error: string | null;
  results: EvalResult[];
}

export const unixSeconds = (ms: number) => Math.floor(ms / 1000);

/** The API's schedule object, in the contract's field order. */
export function scheduleObject(schedule: EvalSchedule, nextRunAtMs: number | undefined) {
  return {
    id: schedule.id,
    object: "eval.schedule",
    name: schedule.name,
    model: schedule.model,
    inputs: schedule.inputs,
    ...schedule.cadence,
    created_at: schedule.created_at,
    next_run_at: nextRunAtMs === undefined ? null : unixSeconds(nextRunAtMs),
    metadata: schedule.metadata,
  };
}

/** The API's run object: its results and the tokens they took. */
export function runObject(run: EvalRun) {
  const usage = { input_tokens: 0, output_tokens: 0, total_tokens: 0 };
  for (const r of run.results) {
    usage.input_tokens += r.usage.input_tokens;
    usage.output_tokens += r.usage.output_tokens;
    usage.total_tokens += r.usage.total_tokens;
  }
  return {
    id: run.id,
    object: "eval.run",
    schedule_id: run.schedule_id,
    status: run.status,
    model: run.model,
    created_at: run.created_at,
    started_at: run.started_at,
    completed_at: run.completed_at,
    error: run.error,
    results: run.results,
    usage,
  };
}
