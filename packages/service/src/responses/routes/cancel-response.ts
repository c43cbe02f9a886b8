import type { ResourceAuthorization } from "@gw/core/authz";
import { AppError, notFound } from "@gw/core/errors";
import { defineRoute } from "@gw/core/http";
import { roleOn } from "../../http/roles.ts";
import { ok } from "../../http/schemas.ts";
import type { BackgroundResponses } from "../background/index.ts";
import type { ResponseStore } from "../store.ts";
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
    if (background && changed.before.status === "queued") {
      // No worker has it: its events (the queue's) end here, its job and its key's slot go; a worker that took
      // it meanwhile finds it cancelled, runs nothing and gives the slot back itself.
      const last = await background.events.last(id);
      await Promise.all([
        last?.ended ? undefined : background.events.end(id, last?.sequence ?? -1),
        background.dequeue(id),
      ]);
    } else await background?.cancels.cancel(principal.org, id);
    return changed.after;
  },
});
