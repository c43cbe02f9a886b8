-- Eval schedules and their runs, written by the service and its eval workers. BullMQ (in Redis)
-- keeps only the job schedulers and the queued jobs.

CREATE TABLE eval_schedules (
  org text NOT NULL,
  id text NOT NULL,
  -- Order of creation: lists page along it, newest first.
  seq bigint GENERATED ALWAYS AS IDENTITY,
  -- The schedule as created (name, model, inputs, cadence, creator...), without deleted_at.
  record json NOT NULL,
  -- Unix seconds; set once by the soft delete.
  deleted_at bigint,
  PRIMARY KEY (org, id)
);
-- An organization's live schedules, newest first (list), and their count (the per-organization cap).
CREATE INDEX eval_schedules_live ON eval_schedules (org, seq DESC) WHERE deleted_at IS NULL;
-- The sweep's scan for deleted schedules whose runs are all gone.
CREATE INDEX eval_schedules_deleted ON eval_schedules (deleted_at) WHERE deleted_at IS NOT NULL;

CREATE TABLE eval_runs (
  org text NOT NULL,
  id text NOT NULL,
  schedule_id text NOT NULL,
  -- Order of queueing: a schedule's runs page along it, newest first.
  seq bigint GENERATED ALWAYS AS IDENTITY,
  -- queued, running, completed, failed.
  status text NOT NULL,
  model text,
  -- Unix seconds; created_at is what EVAL_RUN_RETENTION counts from.
  created_at bigint NOT NULL,
  started_at bigint,
  completed_at bigint,
  error text,
  results json NOT NULL DEFAULT '[]',
  PRIMARY KEY (org, id)
);
-- A schedule's runs, newest first (list runs, the EVAL_RUNS_PER_SCHEDULE cap).
CREATE INDEX eval_runs_schedule ON eval_runs (org, schedule_id, seq DESC);
-- At most one run of a schedule waits to start; a second firing meanwhile is skipped.
CREATE UNIQUE INDEX eval_runs_one_queued ON eval_runs (org, schedule_id) WHERE status = 'queued';
-- An organization's backlog: its runs waiting to start (the fair order of the queue).
CREATE INDEX eval_runs_waiting ON eval_runs (org) WHERE status = 'queued';
-- The retention sweep's scan for expired runs.
CREATE INDEX eval_runs_created_at ON eval_runs (created_at);
