import { AppError, forbidden, responseFailure } from "@gw/core/errors";
import type { Logger } from "@gw/core/logger";
import { MODEL_CALLS } from "@gw/core/permissions";
import type { Caller } from "../../budgets/admit-model-call.ts";
import type { EventSink } from "../../calls/event-sink.ts";
import type { CreatorKeys, KeyPurpose } from "../../evals/creator.ts";
import { ProviderError } from "../../llm/errors.ts";
import { usageOf } from "../../llm/provider.ts";
import type { CreateResponseInput } from "../request.ts";
import { responseUsage } from "../response.ts";
import type { ResponseTurnDeps } from "../response-turn.ts";
import type { ResponseObject } from "../store.ts";
import { type StreamedTurn, streamTurn } from "../stream.ts";
import { startTurn } from "../turn.ts";
import type { CancelSignals } from "./cancels.ts";
import { QUEUED_EVENTS, type ResponseEvents, sseEvent } from "./events.ts";
import type { BackgroundSlots } from "./slots.ts";

/**
 * One queued background response: who asked (the caller as the gateway
 * asserted it: principal, end user and key limits, no credential) and what.
 */
export interface BackgroundJob {
  org: string;
  responseId: string;
  caller: Caller;
  input: CreateResponseInput;
}

export interface BackgroundRunDeps extends ResponseTurnDeps {
  /** The creator's key as it stands when the run starts: a revoked or changed key runs nothing. */
  creators: CreatorKeys;
  events: ResponseEvents;
  cancels: CancelSignals;
  slots: BackgroundSlots;
  logger: Logger;
  /** Counts each run's outcome. */
  finished?(status: ResponseObject["status"]): void;
  /** For tests: runs once the response is in progress, before its turn starts. */
  hooks?: { started?(responseId: string): Promise<void> };
}

/** Why a response that a stopped worker had in progress ends failed (it is not run twice: the provider had it). */
export const STOPPED_WORKER =
  "The worker running this response stopped before it finished; the response was not run again";
const STOPPED_SERVICE = "The service stopped before the response finished";

/** What a background response needs of its creator's key when its run starts. */
const BACKGROUND_RUN: KeyPurpose = {
  needs: [{ permission: MODEL_CALLS, why: ", which model calls need" }],
  key: "The API key that created the response",
  endUser: "The response's end user",
};

const unfinished = (r: ResponseObject) => r.status === "queued" || r.status === "in_progress";

/**
 * Runs a queued background response through the same turn as a foreground
 * one (`startTurn`: checks, admission under the creator's budgets with the
 * reservation a lease this process holds, guardrails, routing, usage), as a
 * stream whose events go to `ResponseEvents`, and leaves it `completed`,
 * `incomplete`, `failed` or `cancelled`. A response found already in
 * progress was taken by a worker that died: it ends failed, saying so.
 * However it ends, the key's slot is given back. `stopping`: the worker is
 * shutting down (the response ends failed).
 */
export async function runBackgroundResponse(
  deps: BackgroundRunDeps,
  job: BackgroundJob,
  stopping: AbortSignal,
): Promise<void> {
  const { org, responseId, caller } = job;
  const watch = deps.cancels.watch(org, responseId);
  try {
    const started = await deps.responses.updateBackground(org, responseId, (r) =>
      r.status === "queued" ? { ...r, status: "in_progress" } : undefined,
    );
    if (!started) return; // deleted meanwhile
    if (started.before.status === "in_progress") {
      deps.logger.warn({ responseId, org }, "a background response's worker stopped mid-run: it ends failed");
      await fail(deps, job, new AppError("internal", STOPPED_WORKER));
      return;
    }
    if (!started.after) return; // cancelled (or ended) before a worker took it
    await deps.hooks?.started?.(responseId);
    try {
      await runTurn(deps, job, started.after, watch.signal, stopping);
    } catch (err) {
      // Its end could not be written (PostgreSQL away…): failed if it can still be, never left in progress.
      deps.logger.error({ err, responseId }, "a background response's run could not be ended");
      await fail(deps, job, new AppError("internal", "The response failed")).catch(() => undefined);
    }
  } finally {
    watch.done();
    await deps.slots
      .give(caller.principal.keyId, responseId)
      .catch((err: unknown) =>
        deps.logger.warn(
          { err: (err as Error).message, responseId },
          "a background response's slot was not given back",
        ),
      );
  }
}

async function runTurn(
  deps: BackgroundRunDeps,
  job: BackgroundJob,
  queued: ResponseObject,
  cancelled: AbortSignal,
  stopping: AbortSignal,
): Promise<void> {
  const { org, responseId, caller, input } = job;
  const signal = AbortSignal.any([cancelled, stopping]);
  const sink = new RecordingSink(deps.events, responseId, caller.requestId ?? responseId, deps.logger);
  let streamed: StreamedTurn | undefined;
  let turn: Awaited<ReturnType<typeof startTurn>> | undefined;
  try {
    // Fail closed: the key revoked, expired or deleted, a permission taken away, the end user no longer
    // allowed since the response was queued: it runs nothing, saying why.
    const creator = await deps.creators.callerOf(
      org,
      {
        user: caller.principal.user,
        keyId: caller.principal.keyId,
      },
      BACKGROUND_RUN,
    );
    if ("refused" in creator) throw forbidden(creator.refused);
    turn = await startTurn(deps, caller, input, {
      response: queued,
      keep: async (response, items) => {
        await deps.responses.updateBackground(
          org,
          responseId,
          // A cancel that came as the model finished stands; what the model produced is kept with it.
          (stored) =>
            unfinished(stored)
              ? response
              : stored.status === "cancelled"
                ? { ...response, status: "cancelled" }
                : undefined,
          {
            input: items,
            ...(input.conversation
              ? {
                  conversation: {
                    conversations: deps.conversations,
                    id: input.conversation,
                    items: [...items, ...response.output],
                  },
                }
              : {}),
          },
        );
      },
    });
    const begun = turn;
    await begun.stream(async () => {
      streamed = await streamTurn(sink, {
        ...deps,
        provider: begun.provider,
        response: begun.response,
        request: begun.request,
        signal,
        obfuscate: input.stream_options?.include_obfuscation === true,
        fileSearch: begun.fileSearch,
      });
      return streamed;
    }, signal);
  } catch (err) {
    // Refused or failed before the model's first output: no event was sent yet.
    if (!signal.aborted) {
      logFailure(deps.logger, err, responseId);
      await fail(deps, job, err, sink);
    }
  }
  await sink.flushed();
  if (sink.terminal === "response.failed" && sink.terminalResponse) {
    const failed = sink.terminalResponse;
    await deps.responses.updateBackground(org, responseId, (r) => (unfinished(r) ? failed : undefined));
    deps.finished?.("failed");
  } else if (sink.terminal) {
    deps.finished?.(turn?.response.status ?? "completed");
  } else if (cancelled.aborted) {
    // Cut short by a cancel: what the model produced is kept, and its tokens were charged.
    const produced = streamed?.partial ?? "";
    const output = streamed?.output ?? [];
    // As charged (the prompt as counted at admission, what was produced); estimated only if it was not.
    const charged =
      streamed?.charged ?? (turn ? usageOf(undefined, turn.request.messages, produced) : undefined);
    const usage = charged ? responseUsage(charged) : undefined;
    const written = await deps.responses.updateBackground(org, responseId, (r) =>
      r.status === "cancelled" || unfinished(r)
        ? {
            ...r,
            status: "cancelled",
            output: output.map((item) =>
              "status" in item && item.status === "in_progress" ? { ...item, status: "incomplete" } : item,
            ) as ResponseObject["output"],
            ...(usage ? { usage } : {}),
          }
        : undefined,
    );
    deps.finished?.("cancelled");
    // The stream ends saying so, with the response as kept (a client can tell a cancel from a cut connection).
    if (written?.after) {
      sink.send(CANCELLED_EVENT, { response: written.after });
      await sink.flushed();
    }
  } else if (stopping.aborted) {
    await fail(deps, job, new AppError("internal", STOPPED_SERVICE), sink);
  }
  await deps.events.end(responseId, sink.last);
}

/** Ends the response failed with `err` in the catalogue's words, and its stream with `response.failed`. */
async function fail(
  deps: BackgroundRunDeps,
  job: BackgroundJob,
  err: unknown,
  sink?: RecordingSink,
): Promise<void> {
  const error = responseFailure(err, "The response failed");
  const written = await deps.responses.updateBackground(job.org, job.responseId, (r) =>
    unfinished(r) ? { ...r, status: "failed", error } : undefined,
  );
  deps.finished?.("failed");
  const failed = written?.after;
  if (!failed) return;
  if (sink) {
    sink.send("response.failed", { response: failed });
    await sink.flushed();
    return;
  }
  // A stopped worker's events end here, after whatever it sent.
  const last = await deps.events.last(job.responseId);
  if (last?.ended) return;
  const next = (last?.sequence ?? -1) + 1;
  await deps.events.append(job.responseId, next, sseEvent("response.failed", next, { response: failed }));
  await deps.events.end(job.responseId, next);
}

function logFailure(logger: Logger, err: unknown, responseId: string): void {
  if (err instanceof ProviderError)
    logger.warn({ err, responseId }, "background response failed: model provider");
  else if (!(err instanceof AppError)) logger.error({ err, responseId }, "background response failed");
}

const TERMINAL = new Set(["response.completed", "response.incomplete", "response.failed"]);

/** The last event of a cancelled background response's stream, with the response (`status: "cancelled"`). */
export const CANCELLED_EVENT = "response.cancelled";

/**
 * The stream writer's sink for a background response: each event goes to
 * `ResponseEvents` in order, after the two the queue sent (`QUEUED_EVENTS`:
 * `response.created` while queued, `response.queued`), so the writer's own
 * `response.created` is left out and the rest numbered on from there; the
 * event that ends the response is remembered.
 */
class RecordingSink implements EventSink {
  private writes: Promise<void> = Promise.resolve();
  private closed = false;
  /** The last event's sequence number as kept (-1: none yet). */
  last = QUEUED_EVENTS - 1;
  terminal: string | undefined;
  terminalResponse: ResponseObject | undefined;

  private readonly events: ResponseEvents;
  private readonly responseId: string;
  readonly requestId: string;
  private readonly logger: Logger;

  constructor(events: ResponseEvents, responseId: string, requestId: string, logger: Logger) {
    this.events = events;
    this.responseId = responseId;
    this.requestId = requestId;
    this.logger = logger;
  }

  open(): void {}

  write(text: string): void {
    const { type, sequence_number, ...data } = JSON.parse(text.slice(text.indexOf("data: ") + 6)) as {
      type: string;
      sequence_number: number;
      response?: ResponseObject;
    };
    if (sequence_number === 0 && type === "response.created") return;
    if (TERMINAL.has(type)) {
      this.terminal = type;
      this.terminalResponse = data.response;
    }
    this.send(type, data);
  }

  /** Keeps an event, numbered after the last. */
  send(type: string, data: Record<string, unknown>): void {
    const sequence = ++this.last;
    const text = sseEvent(type, sequence, data);
    this.writes = this.writes.then(() =>
      this.events
        .append(this.responseId, sequence, text)
        .catch((err: unknown) =>
          this.logger.warn(
            { err: (err as Error).message, responseId: this.responseId },
            "a background response's event was not kept",
          ),
        ),
    );
  }

  end(): void {
    this.closed = true;
  }

  get ended(): boolean {
    return this.closed;
  }

  flushed(): Promise<void> {
    return this.writes;
  }
}
