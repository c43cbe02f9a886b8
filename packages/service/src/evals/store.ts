import type { RedisClient } from "@gw/core";
import type { EvalResult, EvalRun, EvalSchedule, RunStatus } from "./records.ts";

// Every key of an organization carries it as the hash tag, so each script below touches one cluster slot.
const keys = (org: string) => {
  const base = `gw:eval:{${org}}`;
  return {
    seq: `${base}:seq`,
    schedules: `${base}:schedules`,
    /** Ids of the organization's runs waiting for a worker: its backlog, which orders the queue fairly. */
    waiting: `${base}:waiting`,
    schedule: (id: string) => `${base}:schedule:${id}`,
    runs: (scheduleId: string) => `${base}:runs:${scheduleId}`,
    queued: (scheduleId: string) => `${base}:queued:${scheduleId}`,
    run: (id: string) => `${base}:run:${id}`,
  };
};

// Counts the organization's live schedules and adds one in the same step, so concurrent creates never pass the cap.
// KEYS: seq, schedules, schedule. ARGV: id, record, most live schedules allowed.
const CREATE_SCRIPT = `
if redis.call('ZCARD', KEYS[2]) >= tonumber(ARGV[3]) then return 0 end
local seq = redis.call('INCR', KEYS[1])
redis.call('HSET', KEYS[3], 'record', ARGV[2], 'seq', seq)
redis.call('ZADD', KEYS[2], seq, ARGV[1])
return seq
`;

// The soft delete checks and writes in one step, so of two racing deletes exactly one succeeds.
// KEYS: schedule, schedules. ARGV: id, now.
const SOFT_DELETE_SCRIPT = `
if redis.call('HEXISTS', KEYS[1], 'record') == 0 then return 0 end
if redis.call('HSETNX', KEYS[1], 'deleted_at', ARGV[2]) == 0 then return 0 end
redis.call('ZREM', KEYS[2], ARGV[1])
return 1
`;

// A firing becomes a queued run, unless the schedule is gone or already has a run waiting to start.
// Answers with the run's place in its organization's backlog (1: none of its runs was waiting).
// KEYS: schedule, seq, runs, queued, run, waiting. ARGV: run id, schedule id, now.
const ENQUEUE_SCRIPT = `
if redis.call('HEXISTS', KEYS[1], 'record') == 0 then return 'missing' end
if redis.call('HEXISTS', KEYS[1], 'deleted_at') == 1 then return 'deleted' end
if redis.call('SCARD', KEYS[4]) > 0 then return 'busy' end
local seq = redis.call('INCR', KEYS[2])
redis.call('HSET', KEYS[5], 'schedule_id', ARGV[2], 'seq', seq, 'status', 'queued', 'created_at', ARGV[3], 'results', '[]')
redis.call('ZADD', KEYS[3], seq, ARGV[1])
redis.call('SADD', KEYS[4], ARGV[1])
redis.call('SADD', KEYS[6], ARGV[1])
return {'queued', redis.call('SCARD', KEYS[6])}
`;

// A run starts only if its schedule is not deleted, decided in the same step that marks it running,
// so no run starts after a delete has answered. A run found running was interrupted (its worker died).
// KEYS: schedule, run, queued, waiting. ARGV: run id, now, message if deleted, message if interrupted.
// Returns the outcome, and the schedule's record when the run started.
const START_SCRIPT = `
local status = redis.call('HGET', KEYS[2], 'status')
if status == 'running' then
  redis.call('HSET', KEYS[2], 'status', 'failed', 'completed_at', ARGV[2], 'error', ARGV[4])
  return 'interrupted'
end
if status ~= 'queued' then return 'gone' end
redis.call('SREM', KEYS[3], ARGV[1])
redis.call('SREM', KEYS[4], ARGV[1])
if redis.call('HEXISTS', KEYS[1], 'deleted_at') == 1 or redis.call('HEXISTS', KEYS[1], 'record') == 0 then
  redis.call('HSET', KEYS[2], 'status', 'failed', 'completed_at', ARGV[2], 'error', ARGV[3])
  return 'deleted'
end
redis.call('HSET', KEYS[2], 'status', 'running', 'started_at', ARGV[2])
return {'started', redis.call('HGET', KEYS[1], 'record')}
`;

export type EnqueueOutcome =
  | { outcome: "queued"; backlog: number }
  | { outcome: "busy" | "deleted" | "missing" };
export type StartOutcome = "started" | "deleted" | "interrupted" | "gone";

export interface Page<T> {
  data: T[];
  has_more: boolean;
}

/**
 * Eval schedules and their runs in Redis, per organization: the
 * organization is part of every key, so another organization's id is simply
 * absent. Lists are sorted sets scored by a per-organization sequence,
 * newest first; a cursor is the id of the last item seen.
 */
export class EvalStore {
  private readonly redis: RedisClient;

  constructor(redis: RedisClient) {
    this.redis = redis;
  }

  /**
   * Adds the schedule unless the organization already has `max` live ones:
   * false then. Counting and adding are one step.
   */
  async createWithinCap(org: string, schedule: EvalSchedule, max: number): Promise<boolean> {
    const k = keys(org);
    const { deleted_at: _, ...record } = schedule;
    const created = await this.redis.eval(
      CREATE_SCRIPT,
      3,
      k.seq,
      k.schedules,
      k.schedule(schedule.id),
      schedule.id,
      JSON.stringify(record),
      max,
    );
    return created !== 0;
  }

  /** Undoes a creation that could not be scheduled. */
  async remove(org: string, id: string): Promise<void> {
    const k = keys(org);
    await this.redis.multi().del(k.schedule(id)).zrem(k.schedules, id).exec();
  }

  /** The schedule, deleted or not; undefined if this organization has none with this id. */
  async get(org: string, id: string): Promise<EvalSchedule | undefined> {
    const hash = await this.redis.hgetall(keys(org).schedule(id));
    return parseSchedule(hash);
  }

  /** True if this call deleted it; false if it did not exist or was already deleted. */
  async softDelete(org: string, id: string, at: number): Promise<boolean> {
    const k = keys(org);
    return (await this.redis.eval(SOFT_DELETE_SCRIPT, 2, k.schedule(id), k.schedules, id, at)) === 1;
  }

  /** The organization's live schedules, newest first; null if `after` names none of its schedules. */
  async list(org: string, limit: number, after?: string): Promise<Page<EvalSchedule> | null> {
    const k = keys(org);
    const afterSeq = after === undefined ? undefined : await this.redis.hget(k.schedule(after), "seq");
    const ids = await this.page(k.schedules, limit, afterSeq);
    if (!ids) return null;
    const pipeline = this.redis.pipeline();
    for (const id of ids.data) pipeline.hgetall(k.schedule(id));
    const schedules = ((await pipeline.exec()) ?? [])
      .map(([, hash]) => parseSchedule(hash as Record<string, string>))
      .filter((s): s is EvalSchedule => s !== undefined && s.deleted_at === null); // deleted meanwhile
    return { data: schedules, has_more: ids.has_more };
  }

  /** Queues a run for a firing; `backlog` counts the organization's runs now waiting, this one included. */
  async enqueue(org: string, scheduleId: string, runId: string, at: number): Promise<EnqueueOutcome> {
    const k = keys(org);
    const result = (await this.redis.eval(
      ENQUEUE_SCRIPT,
      6,
      k.schedule(scheduleId),
      k.seq,
      k.runs(scheduleId),
      k.queued(scheduleId),
      k.run(runId),
      k.waiting,
      runId,
      scheduleId,
      at,
    )) as ["queued", number] | "busy" | "deleted" | "missing";
    return Array.isArray(result) ? { outcome: "queued", backlog: result[1] } : { outcome: result };
  }

  /** Marks a queued run running, unless its schedule was deleted; the schedule comes with `started`. */
  async start(
    org: string,
    scheduleId: string,
    runId: string,
    at: number,
  ): Promise<{ outcome: Exclude<StartOutcome, "started"> } | { outcome: "started"; schedule: EvalSchedule }> {
    const k = keys(org);
    const result = (await this.redis.eval(
      START_SCRIPT,
      4,
      k.schedule(scheduleId),
      k.run(runId),
      k.queued(scheduleId),
      k.waiting,
      runId,
      at,
      "The schedule was deleted before this run started",
      "The worker running it stopped before it finished",
    )) as Exclude<StartOutcome, "started"> | ["started", string];
    if (!Array.isArray(result)) return { outcome: result };
    return { outcome: "started", schedule: parseSchedule({ record: result[1] })! };
  }

  /** Ends a queued run that could not be handed to the queue, so the schedule's next firing is not skipped. */
  async abandon(org: string, scheduleId: string, runId: string, at: number, error: string): Promise<void> {
    const k = keys(org);
    await this.redis
      .multi()
      .srem(k.queued(scheduleId), runId)
      .srem(k.waiting, runId)
      .hset(k.run(runId), { status: "failed", completed_at: at, error })
      .exec();
  }

  /** Records what a run has produced so far (and its model), or how it ended. */
  async update(
    org: string,
    runId: string,
    fields: {
      model?: string;
      results?: EvalResult[];
      end?: { status: Extract<RunStatus, "completed" | "failed">; at: number; error: string | null };
    },
  ): Promise<void> {
    const key = keys(org).run(runId);
    const values: Record<string, string | number> = {};
    if (fields.model !== undefined) values.model = fields.model;
    if (fields.results) values.results = JSON.stringify(fields.results);
    const tx = this.redis.multi();
    if (fields.end) {
      values.status = fields.end.status;
      values.completed_at = fields.end.at;
      if (fields.end.error === null) tx.hdel(key, "error");
      else values.error = fields.end.error;
    }
    await tx.hset(key, values).exec();
  }

  async getRun(org: string, runId: string): Promise<EvalRun | undefined> {
    return parseRun(runId, await this.redis.hgetall(keys(org).run(runId)));
  }

  /** A schedule's runs, newest first (they outlive its deletion); null if `after` names none of them. */
  async runs(org: string, scheduleId: string, limit: number, after?: string): Promise<Page<EvalRun> | null> {
    const k = keys(org);
    let afterSeq: string | null | undefined;
    if (after !== undefined) {
      const [owner, seq] = await this.redis.hmget(k.run(after), "schedule_id", "seq");
      afterSeq = owner === scheduleId ? seq : null;
    }
    const ids = await this.page(k.runs(scheduleId), limit, afterSeq);
    if (!ids) return null;
    const pipeline = this.redis.pipeline();
    for (const id of ids.data) pipeline.hgetall(k.run(id));
    const runs = ((await pipeline.exec()) ?? [])
      .map(([, hash], i) => parseRun(ids.data[i]!, hash as Record<string, string>))
      .filter((r): r is EvalRun => r !== undefined);
    return { data: runs, has_more: ids.has_more };
  }

  /** Ids after the one with sequence `afterSeq` (undefined: from the newest; null: an unknown cursor). */
  private async page(
    set: string,
    limit: number,
    afterSeq: string | null | undefined,
  ): Promise<Page<string> | null> {
    if (afterSeq === null) return null;
    const ids = afterSeq
      ? await this.redis.zrevrangebyscore(set, `(${afterSeq}`, "-inf", "LIMIT", 0, limit + 1)
      : await this.redis.zrevrange(set, 0, limit);
    return { data: ids.slice(0, limit), has_more: ids.length > limit };
  }
}

function parseSchedule(hash: Record<string, string>): EvalSchedule | undefined {
  if (!hash.record) return undefined;
  return {
    ...(JSON.parse(hash.record) as Omit<EvalSchedule, "deleted_at">),
    deleted_at: hash.deleted_at ? Number(hash.deleted_at) : null,
  };
}

function parseRun(id: string, hash: Record<string, string>): EvalRun | undefined {
  if (!hash.status) return undefined;
  const num = (v: string | undefined) => (v === undefined ? null : Number(v));
  return {
    id,
    schedule_id: hash.schedule_id!,
    status: hash.status as RunStatus,
    model: hash.model ?? null,
    created_at: Number(hash.created_at),
    started_at: num(hash.started_at),
    completed_at: num(hash.completed_at),
    error: hash.error ?? null,
    results: JSON.parse(hash.results ?? "[]") as EvalResult[],
  };
}
