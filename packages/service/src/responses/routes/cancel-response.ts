import type { ResourceAuthorization } from "@gw/core/authz";
import { AppError, notFound } from "@gw/core/errors";
import { defineRoute } from "@gw/core/http";
import { roleOn } from "../../http/roles.ts";
import { ok } from "../../http/schemas.ts";
import { sseEvent } from "../background/events.ts";
import type { BackgroundResponses } from "../background/index.ts";
import { CANCELLED_EVENT } from "../background/run.ts";
import type { ResponseObject, ResponseStore } from "../store.ts";
import { response, TAG } from "./schemas.ts";

/**
 * `POST /api/v1/llm/responses/{id}/cancel`: a writer cancels a background
 * response that is queued or in progress. It is `cancelled` at once (in the
 * store, under the row's lock, so its worker cannot finish it as anything
 * else); the worker running it hears the cancel and aborts the provider
 * call, and what the model produced is kept and charged. A response that
 * has ended, or never ran in the background, is a 400; others get the 404
 * or 403 of any response they may not change.
 */
export const cancelResponse = defineRoute({
  method: "POST",
  path: "/api/v1/llm/responses/:id/cancel",
  operationId: "cancelResponse",
  summary: "Cancel a background response that is queued or in progress (writer)",
  tag: TAG,
  permission: "responses:write",
  responses: ok("The response, cancelled", response),
  errors: ["bad_request", "not_found"],
  authorize: roleOn("response", "writer"),
  handler: async (
    { principal, params },
    deps: {
      authorization: ResourceAuthorization;
      responses: ResponseStore;
      background?: BackgroundResponses | undefined;
    },
  ) => {
    const id = params.id!;
    const changed = await deps.responses.updateBackground(principal.org, id, (r) =>
      r.background && (r.status === "queued" || r.status === "in_progress")
        ? { ...r, status: "cancelled" }
        : undefined,
    );
    if (!changed) throw notFound(`No response ${id}`);
    if (!changed.after)
      throw new AppError(
        "bad_request",
        changed.before.background
          ? "Only a background response that is queued or in progress can be cancelled; this one has ended"
          : "Only background responses can be cancelled",
      );
    const background = deps.background;
    if (!background) return changed.after;
    if (changed.before.status === "queued") {
      // No worker has it: its events (the queue's) end here, its job and its key's slot go; a worker that took
      // it meanwhile finds it cancelled, runs nothing and gives the slot back itself.
      const last = await background.events.last(id);
      await Promise.all([
        last?.ended ? undefined : endCancelled(background, id, last, changed.after),
        background.dequeue(id),
      ]);
      return changed.after;
    }
    await background.cancels.cancel(principal.org, id);
    // The worker stops the call and keeps what was produced, with its usage: answered once it has (its
    // stream ends), so the answer shows them; a worker that does not within the wait leaves them to a later read.
    return (await ended(background, id))
      ? ((await deps.responses.get(principal.org, id)) ?? changed.after)
      : changed.after;
  },
});

/** How long a cancel waits for the worker running the response to stop it and keep what it produced. */
const CANCEL_WAIT_MS = 5_000;
const CANCEL_POLL_MS = 25;

/** Whether the response's events end within `CANCEL_WAIT_MS`. */
async function ended(background: BackgroundResponses, id: string): Promise<boolean> {
  const deadline = Date.now() + CANCEL_WAIT_MS;
  for (;;) {
    if ((await background.events.last(id))?.ended) return true;
    if (Date.now() >= deadline) return false;
    await new Promise((resolve) => setTimeout(resolve, CANCEL_POLL_MS));
  }
}

/** Ends a queued response's events with the cancel, as a worker ends a running one's. */
async function endCancelled(
  background: BackgroundResponses,
  id: string,
  last: { sequence: number } | undefined,
  cancelled: ResponseObject,
): Promise<void> {
  const next = (last?.sequence ?? -1) + 1;
  await background.events.append(id, next, sseEvent(CANCELLED_EVENT, next, { response: cancelled }));
  await background.events.end(id, next);
}
