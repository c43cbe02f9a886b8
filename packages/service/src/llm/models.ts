import { AppError, forbidden, ValidationFailed } from "@gw/core/errors";
import type { Principal } from "@gw/core/principal";
import { storableText } from "@gw/core/validation";
import { z } from "zod";
import type { ModelMode } from "./catalogue.ts";
import type { CallRoute, ChatProvider } from "./provider.ts";

/**
 * A model name as a request gives it (`auto`: the default): 1 to 256
 * characters, neither U+0000 nor a lone surrogate among them. Such a name
 * names no model, and could be neither sent to a provider as UTF-8, counted
 * in usage, nor kept with an eval run.
 */
export const modelName = storableText(z.string().min(1).max(256)).default("auto");

/** A model as OpenAI's `GET /models` lists it. */
export interface ModelObject {
  id: string;
  object: "model";
  created: number;
  owned_by: string;
}

/**
 * The models the principal's key may use, default first: the catalogue's
 * names (`LLM_DEFAULT_MODEL`, then the others in the catalogue's order)
 * within the key's allowlist. With the shorthand without `LLM_MODELS` any
 * model may be asked for, so a key's allowlist is what it may use.
 */
export function usableModels(provider: ChatProvider, principal: Principal): string[] {
  const configured = provider.allowedModels ?? principal.models ?? [];
  const candidates = [...new Set([provider.defaultModel, ...configured].filter((m) => m !== undefined))];
  return principal.models ? candidates.filter((m) => principal.models!.includes(m)) : candidates;
}

/** The model to call for `requested` (`auto`: the default); 422 `enum` at `model` when the service does not offer it. */
export function resolveModel(provider: ChatProvider, requested: string): string {
  const model = provider.resolveModel(requested);
  if (model) return model;
  throw new ValidationFailed([
    {
      loc: ["body", "model"],
      msg: "Input should be 'auto' or one of the allowed models",
      type: "enum",
      input: requested,
      ctx: { expected: ["auto", ...(provider.allowedModels ?? [])].join(", ") },
    },
  ]);
}

/**
 * The model to call for `requested` (`resolveModel`: 422 when it is not
 * offered; 403 when the principal's key may not use it) and where the call
 * may go after it: its fallbacks, each one the key may use (the pipeline
 * adds who calls: `admitCall`). Every model call's request is made with this.
 */
export function routeOf(
  provider: ChatProvider,
  principal: Principal,
  requested: string,
  use: ModelMode = "chat",
): { model: string; route: CallRoute } {
  const model = resolveModel(provider, requested);
  requireMode(provider, model, use);
  requireUsableModel(principal, model);
  const [, ...fallbacks] = provider.reachable(model, principal.models);
  return { model, route: { fallbacks } };
}

/** 400 at `model` when the catalogue says `model` is for something else (`mode`: chat or embeddings). */
export function requireMode(provider: ChatProvider, model: string, use: ModelMode): void {
  const mode = provider.modeOf(model);
  if (mode === undefined || mode === use) return;
  throw new AppError(
    "bad_request",
    use === "chat"
      ? `The model '${model}' makes embeddings only: call /embeddings with it`
      : `The model '${model}' cannot make embeddings: it is a chat model`,
    { param: "model" },
  );
}

/** 403 naming the model when the principal's key may not use it. */
export function requireUsableModel(principal: Principal, model: string): void {
  if (principal.models && !principal.models.includes(model)) {
    throw forbidden(`This API key may not use the model '${model}'`, { param: "model" });
  }
}

export const modelObject = (id: string, ownedBy: string): ModelObject => ({
  id,
  object: "model",
  created: 0,
  owned_by: ownedBy,
});
