import { AppError } from "@gw/core/errors";
import type { ProviderKind } from "./catalogue.ts";
import type { ChatRequest, ProviderField } from "./chat.ts";

/**
 * The request fields each provider kind cannot take, its API having nothing
 * like them: Anthropic's Messages API gives one answer a call, has no
 * presence or frequency penalty, no token biases and no log probabilities.
 * A request with one of them set is never sent to such a deployment (it
 * would be answered as if the field were not there): the router passes
 * those deployments over, and a request none of whose deployments can take
 * it is refused by name before anything is reserved (`refuseUntakenFields`).
 * `docs/api/openai-fields.md` says the same, as `pnpm check:config` checks.
 */
export const FIELDS_NOT_TAKEN: Readonly<Record<ProviderKind, readonly ProviderField[]>> = {
  openai: [],
  azure: [],
  anthropic: ["n", "presence_penalty", "frequency_penalty", "logit_bias", "logprobs", "top_logprobs"],
};

/** The fields of `request` some provider kind may not take, as the client named them, in a stable order. */
export function providerFieldsOf(request: ChatRequest): ProviderField[] {
  const fields: ProviderField[] = [];
  if ((request.n ?? 1) > 1) fields.push("n");
  if (request.presencePenalty) fields.push("presence_penalty");
  if (request.frequencyPenalty) fields.push("frequency_penalty");
  if (request.logitBias && Object.keys(request.logitBias).length) fields.push("logit_bias");
  if (request.logprobs) fields.push(request.topLogprobs ? "top_logprobs" : "logprobs");
  return fields;
}

/** The first field of `request` that a deployment of `kind` cannot take; undefined when it takes them all. */
export function fieldNotTaken(kind: ProviderKind, request: ChatRequest): ProviderField | undefined {
  const refused = FIELDS_NOT_TAKEN[kind];
  return providerFieldsOf(request).find((field) => refused.includes(field));
}

/**
 * Refuses (400 `bad_request`, the field as `param`) a request that no
 * deployment of the names it may reach (`kinds`: their provider kinds) can
 * take as asked.
 */
export function refuseUntakenFields(
  model: string,
  kinds: readonly ProviderKind[],
  request: ChatRequest,
): void {
  if (kinds.length === 0 || kinds.some((kind) => fieldNotTaken(kind, request) === undefined)) return;
  const taken = fieldNotTaken(kinds[0]!, request)!;
  const field = request.fieldNames?.[taken] ?? taken;
  const providers = [...new Set(kinds)].join(", ");
  throw new AppError(
    "bad_request",
    `${field} is not supported by the provider of the model '${model}' (${providers}): leave it out, or use a model whose provider takes it`,
    { param: field },
  );
}
