import { defineRoute } from "@gw/core/http";
import { objectSchema } from "@gw/core/openapi";
import { ok } from "../../http/schemas.ts";
import { modelObject, usableModels } from "../../llm/models.ts";
import type { ChatProvider } from "../../llm/provider.ts";
import { MODEL_ACCESS, model, TAG } from "./schemas.ts";

/** `GET /api/v1/llm/models`: OpenAI's list of the models this key may use (`LLM_DEFAULT_MODEL` first). */
export const listModels = defineRoute({
  method: "GET",
  path: "/api/v1/llm/models",
  operationId: "listModels",
  summary: "The models this key may use, as OpenAI lists them",
  tag: TAG,
  permission: MODEL_ACCESS,
  responses: ok(
    "The list",
    objectSchema({ object: { type: "string", const: "list" }, data: { type: "array", items: model } }),
  ),
  handler: ({ principal }, deps: { provider: ChatProvider }) => ({
    object: "list",
    data: usableModels(deps.provider, principal).map((id) => modelObject(id, deps.provider.ownedBy(id))),
  }),
});
