import type { ResourceAuthorization } from "@gw/core/authz";
import { AppError, notFound } from "@gw/core/errors";
import { defineRoute } from "@gw/core/http";
import { stringSchema } from "@gw/core/openapi";
import { queryInt } from "@gw/core/validation";
import { z } from "zod";
import { roleOn } from "../../http/roles.ts";
import type { BackgroundResponses } from "../background/index.ts";
import type { ResponseStore } from "../store.ts";
import { streamEvents } from "./background-events.ts";
import { response, TAG } from "./schemas.ts";

export const getResponseQuery = z.object({
  // A background response's events, as they are kept (responses/background/events.ts).
  stream: z.enum(["true", "false"]).optional(),
  starting_after: queryInt(z.int().min(0)).optional(),
});

/**
 * `GET /api/v1/llm/responses/{id}`: needs reader. With `stream=true`, a
 * background response's events (from the one after `starting_after`), live
 * until it ends.
 */
export const getResponse = defineRoute({
  method: "GET",
  path: "/api/v1/llm/responses/:id",
  operationId: "getResponse",
  summary: "A stored response (reader); a background response's events with stream=true",
  tag: TAG,
  permission: "responses:read",
  query: getResponseQuery,
  responses: {
    200: {
      description: "The response object, or a background response's events with stream=true",
      schema: response,
      alternatives: { "text/event-stream": stringSchema("Responses API events") },
    },
  },
  errors: ["bad_request", "not_found"],
  authorize: roleOn("response", "reader"),
  handler: async (
    { principal, params, query, res },
    deps: {
      responses: ResponseStore;
      authorization: ResourceAuthorization;
      background?: BackgroundResponses | undefined;
    },
  ) => {
    const found = await deps.responses.get(principal.org, params.id!);
    if (!found) throw notFound(`No response ${params.id}`);
    if (query.stream !== "true") {
      if (query.starting_after !== undefined)
        throw new AppError("bad_request", "starting_after needs stream=true", { param: "starting_after" });
      return found;
    }
    if (!found.background || !deps.background)
      throw new AppError("bad_request", "Only background responses can be streamed", { param: "stream" });
    const ended = found.status !== "queued" && found.status !== "in_progress";
    if (ended && !(await deps.background.events.last(found.id)))
      throw new AppError("bad_request", "The events of this response are no longer kept", {
        param: "stream",
      });
    await streamEvents(deps.background, found.id, query.starting_after ?? -1, res);
    return undefined;
  },
});
