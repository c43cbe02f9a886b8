import { Worker } from "node:worker_threads";
import { serviceUnavailable } from "@gw/core/errors";
import type { Tokenizer } from "./token-count.ts";
import type { CountAnswer, CountJob } from "./token-worker.ts";

/**
 * Worker threads that count large prompts' tokens, so the event loop never
 * does work that grows with a prompt while other requests wait for it (a
 * count of 1 MiB of text takes 20–100 ms of CPU). Jobs wait in one lane per
 * tenant (organization) and the lanes take turns, the one served longest ago
 * (or never) first: a tenant that sends twenty large prompts at once delays
 * another's by the jobs already running, not by its queue.
 * Each job has a deadline, counted from when it was asked: one still waiting
 * then is dropped, one still running ends its worker (a fresh one takes its
 * place), and either is a 503 to its caller. Workers start when first needed
 * and keep the process alive only while they count.
 */
export class TokenPool {
  private readonly idle: Worker[] = [];
  private readonly running = new Map<Worker, Job>();
  private readonly lanes = new Map<string, Lane>();
  private started = 0;
  private served = 0;
  private nextId = 0;
  private closed = false;
  /** Worker threads at most. */
  private readonly workers: number;
  /** Longest a job may wait and run, in milliseconds. */
  private readonly timeoutMs: number;

  constructor(workers: number, timeoutMs: number) {
    this.workers = workers;
    this.timeoutMs = timeoutMs;
  }

  /** The tokens of all `texts`, counted by a worker; `tenant` is the lane the job waits in. */
  count(tenant: string, tokenizer: Tokenizer, texts: string[]): Promise<number> {
    if (this.closed) return Promise.reject(new Error("the token-counting pool is closed"));
    return new Promise<number>((resolve, reject) => {
      const job: Job = { id: this.nextId++, tenant, tokenizer, texts, resolve, reject };
      job.deadline = setTimeout(() => this.expire(job), this.timeoutMs);
      job.deadline.unref();
      const lane = this.lanes.get(tenant);
      if (lane) lane.jobs.push(job);
      else this.lanes.set(tenant, { jobs: [job], served: -1, running: 0 });
      this.dispatch();
    });
  }

  /** Ends every worker; jobs still waiting or running fail. */
  async close(): Promise<void> {
    this.closed = true;
    const gone = new Error("the token-counting pool is closed");
    for (const lane of this.lanes.values()) for (const job of lane.jobs) this.settle(job, gone);
    this.lanes.clear();
    const workers = [...this.idle, ...this.running.keys()];
    for (const job of this.running.values()) this.settle(job, gone);
    this.idle.length = 0;
    this.running.clear();
    await Promise.all(workers.map((w) => w.terminate()));
  }

  /** Hands waiting jobs to free workers: each time the lane served longest ago gives its oldest. */
  private dispatch(): void {
    while (this.lanes.size > 0 && (this.idle.length > 0 || this.started < this.workers)) {
      let lane: Lane | undefined;
      for (const l of this.lanes.values()) {
        if (l.jobs.length > 0 && (!lane || l.served < lane.served)) lane = l;
      }
      if (!lane) return;
      const job = lane.jobs.shift()!;
      lane.served = this.served++;
      // The lane stays while its job runs: the tenant keeps its place behind those served since.
      lane.running++;
      job.running = true;
      const worker = this.idle.pop() ?? this.spawn();
      this.running.set(worker, job);
      worker.ref();
      const message: CountJob = { id: job.id, tokenizer: job.tokenizer, texts: job.texts };
      worker.postMessage(message);
    }
  }

  private spawn(): Worker {
    const worker = new Worker(new URL("./token-worker.ts", import.meta.url));
    this.started++;
    worker.on("message", (answer: CountAnswer) => {
      const job = this.running.get(worker);
      if (!job || job.id !== answer.id) return;
      this.running.delete(worker);
      worker.unref();
      this.idle.push(worker);
      this.settle(job, "error" in answer ? new Error(answer.error) : answer.tokens);
      this.dispatch();
    });
    const lost = (err: Error) => {
      if (!this.forget(worker)) return;
      const job = this.running.get(worker);
      this.running.delete(worker);
      if (job) this.settle(job, err);
      this.dispatch();
    };
    worker.on("error", lost);
    worker.on("exit", (code) => lost(new Error(`a token-counting worker exited (code ${code})`)));
    return worker;
  }

  /** Takes a worker out of the pool; false when it was out already. */
  private forget(worker: Worker): boolean {
    const at = this.idle.indexOf(worker);
    if (at >= 0) this.idle.splice(at, 1);
    else if (!this.running.has(worker)) return false;
    this.started--;
    return true;
  }

  /** The deadline passed: a waiting job is dropped, a running one ends its worker. */
  private expire(job: Job): void {
    const lane = this.lanes.get(job.tenant);
    const at = lane?.jobs.indexOf(job) ?? -1;
    if (lane && at >= 0) {
      lane.jobs.splice(at, 1);
      if (lane.jobs.length === 0 && lane.running === 0) this.lanes.delete(job.tenant);
    } else {
      for (const [worker, running] of this.running) {
        if (running !== job) continue;
        this.forget(worker);
        this.running.delete(worker);
        void worker.terminate();
        break;
      }
    }
    this.settle(
      job,
      serviceUnavailable(`Counting the prompt's tokens took longer than ${this.timeoutMs} ms; try again`),
    );
    this.dispatch();
  }

  private settle(job: Job, outcome: number | Error): void {
    clearTimeout(job.deadline);
    const lane = this.lanes.get(job.tenant);
    if (job.running && lane) {
      job.running = false;
      lane.running--;
      if (lane.jobs.length === 0 && lane.running === 0) this.lanes.delete(job.tenant);
    }
    if (typeof outcome === "number") job.resolve(outcome);
    else job.reject(outcome);
  }
}

/** A tenant's waiting jobs, oldest first, when it was last served (-1: not yet), and its jobs running. */
interface Lane {
  jobs: Job[];
  served: number;
  running: number;
}

interface Job {
  id: number;
  tenant: string;
  tokenizer: Tokenizer;
  texts: string[];
  resolve: (tokens: number) => void;
  reject: (err: Error) => void;
  deadline?: NodeJS.Timeout;
  running?: boolean;
}
