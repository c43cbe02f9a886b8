import { AppError } from "@gw/core/errors";
import { principalOf } from "@gw/core/http";
import type { Router } from "express";
import { modelObject, usableModels } from "../../llm/models.ts";
import type { ChatProvider } from "../../llm/provider.ts";
import { requireModelAccess } from "./access.ts";

/** `GET /api/v1/llm/models/{id}`: the model, if this key may use it; 404 otherwise. */
export function registerGetModel(router: Router, deps: { provider: ChatProvider }): void {
  router.get("/llm/models/:id", requireModelAccess, (req, res) => {
    const id = String(req.params.id);
    if (!usableModels(deps.provider, principalOf(res)).includes(id))
      throw new AppError("not_found", `No model ${id}`, { param: "model" });
    res.json(modelObject(id));
  });
}
