import type { ResourceAuthorization } from "@gw/core/authz";
import { notFound } from "@gw/core/errors";
import { defineRoute } from "@gw/core/http";
import { z } from "zod";
import { metadataSchema } from "../../conversations/metadata.ts";
import { roleOn } from "../../http/roles.ts";
import { ok } from "../../http/schemas.ts";
import type { CompletionStore } from "../store.ts";
import { DEPRECATED, TAG } from "./deprecation.ts";
import { completion as completionSchema } from "./schemas.ts";

/** `null` clears the metadata, as OpenAI's update does. */
export const updateCompletionBody = z.strictObject({
  metadata: metadataSchema.nullable().transform((m) => m ?? {}),
});

/** `POST /api/v1/llm/chat/completions/{id}` `{metadata}`: replaces a stored completion's metadata; needs writer. */
export const updateCompletion = defineRoute({
  method: "POST",
  path: "/api/v1/llm/chat/completions/:id",
  operationId: "updateChatCompletion",
  summary: "Replace a stored completion's metadata (writer); `null` clears it",
  tag: TAG,
  deprecated: DEPRECATED,
  permission: "responses:write",
  body: updateCompletionBody,
  responses: ok("The completion", completionSchema),
  errors: ["not_found"],
  authorize: roleOn("completion", "writer"),
  handler: async (
    { principal, params, body },
    deps: { completions: CompletionStore; authorization: ResourceAuthorization },
  ) => {
    const id = params.id!;
    const completion = await deps.completions.get(principal.org, id);
    if (!completion) throw notFound(`No completion ${id}`);
    completion.metadata = body.metadata;
    if (!(await deps.completions.replace(principal.org, completion))) throw notFound(`No completion ${id}`);
    return completion;
  },
});
