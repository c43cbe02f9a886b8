import type { ResourceAuthorization } from "@gw/core/authz";
import { notFound } from "@gw/core/errors";
import { defineRoute } from "@gw/core/http";
import { z } from "zod";
import { roleOn } from "../../http/roles.ts";
import { ok } from "../../http/schemas.ts";
import { notSupported } from "../../schema.ts";
import type { ResponseStore } from "../store.ts";
import { response, TAG } from "./schemas.ts";

export const getResponseQuery = z.object({
  // Replaying a response as a stream is for background responses, which this service does not run.
  stream: notSupported("Streaming a stored response", (v) => v === "false"),
  starting_after: notSupported("starting_after"),
});

/** `GET /api/v1/llm/responses/{id}`: needs reader. */
export const getResponse = defineRoute({
  method: "GET",
  path: "/api/v1/llm/responses/:id",
  operationId: "getResponse",
  summary: "A stored response (reader)",
  tag: TAG,
  permission: "responses:read",
  query: getResponseQuery,
  responses: ok("The response object", response),
  errors: ["not_found"],
  authorize: roleOn("response", "reader"),
  handler: async (
    { principal, params },
    deps: { responses: ResponseStore; authorization: ResourceAuthorization },
  ) => {
    const found = await deps.responses.get(principal.org, params.id!);
    if (!found) throw notFound(`No response ${params.id}`);
    return found;
  },
});
