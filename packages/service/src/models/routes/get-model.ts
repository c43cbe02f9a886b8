import { AppError } from "@gw/core/errors";
import { defineRoute } from "@gw/core/http";
import { ok } from "../../http/schemas.ts";
import { modelObject, usableModels } from "../../llm/models.ts";
import type { ChatProvider } from "../../llm/provider.ts";
import { MODEL_ACCESS, model, TAG } from "./schemas.ts";

/** `GET /api/v1/llm/models/{id}`: the model, if this key may use it (`auto`: the default one); 404 otherwise. */
export const getModel = defineRoute({
  method: "GET",
  path: "/api/v1/llm/models/:id",
  operationId: "getModel",
  summary: "One model this key may use",
  tag: TAG,
  permission: MODEL_ACCESS,
  responses: ok("The model", model),
  errors: ["not_found"],
  handler: ({ principal, params }, deps: { provider: ChatProvider }) => {
    const id = params.id!;
    // `auto`, which every model field takes, is the default model under its own name (not listed: an alias).
    const model = id === "auto" ? deps.provider.defaultModel : id;
    if (model === undefined || !usableModels(deps.provider, principal).includes(model))
      throw new AppError("not_found", `No model ${id}`, { param: "model" });
    return modelObject(id, deps.provider.ownedBy(model));
  },
});
