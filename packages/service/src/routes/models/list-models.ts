import { principalOf } from "@gw/core/http";
import type { Router } from "express";
import { modelObject, usableModels } from "../../llm/models.ts";
import type { ChatProvider } from "../../llm/provider.ts";
import { requireModelAccess } from "./access.ts";

/** `GET /api/v1/llm/models`: OpenAI's list of the models this key may use (`LLM_DEFAULT_MODEL` first). */
export function registerListModels(router: Router, deps: { provider: ChatProvider }): void {
  router.get("/llm/models", requireModelAccess, (_req, res) => {
    res.json({ object: "list", data: usableModels(deps.provider, principalOf(res)).map(modelObject) });
  });
}
