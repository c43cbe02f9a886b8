import type { ResourceAuthorization } from "@gw/core/authz";
import { notFound } from "@gw/core/errors";
import { defineRoute } from "@gw/core/http";
import { roleOn } from "../../http/roles.ts";
import { ok } from "../../http/schemas.ts";
import type { CompletionStore } from "../store.ts";
import { DEPRECATED, TAG } from "./deprecation.ts";
import { completion } from "./schemas.ts";

/** `GET /api/v1/llm/chat/completions/{id}`: a stored completion; needs reader. */
export const getCompletion = defineRoute({
  method: "GET",
  path: "/api/v1/llm/chat/completions/:id",
  operationId: "getChatCompletion",
  summary: "A stored completion (reader)",
  tag: TAG,
  deprecated: DEPRECATED,
  permission: "responses:read",
  responses: ok("The completion", completion),
  errors: ["not_found"],
  authorize: roleOn("completion", "reader"),
  handler: async (
    { principal, params },
    deps: { completions: CompletionStore; authorization: ResourceAuthorization },
  ) => {
    const found = await deps.completions.get(principal.org, params.id!);
    if (!found) throw notFound(`No completion ${params.id}`);
    return found;
  },
});
