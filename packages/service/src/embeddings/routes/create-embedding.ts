import { objectSchema, stringSchema } from "@gw/core/openapi";
import { MODEL_CALLS } from "@gw/core/permissions";
import { budgetHeaders } from "../../budgets/headers.ts";
import { type EmbeddedTexts, type EmbeddingCallDeps, embedTexts } from "../../calls/embeddings.ts";
import { abortOnClose } from "../../http/model-call.ts";
import { modelRoute } from "../../http/model-route.ts";
import { base64OfFloat32s } from "../../llm/embeddings.ts";
import { withoutNulls } from "../../schema.ts";
import { type CreateEmbeddingInput, createEmbeddingBody } from "../request.ts";

export const TAG = "Embeddings";

/** OpenAI's embeddings answer (`CreateEmbeddingResponse`), as the OpenAPI document shows it. */
const embeddingList = objectSchema({
  object: { type: "string", const: "list" },
  data: {
    type: "array",
    items: objectSchema({
      object: { type: "string", const: "embedding" },
      index: { type: "integer" },
      embedding: {
        anyOf: [
          { type: "array", items: { type: "number" } },
          stringSchema("`encoding_format: base64`: the vector's little-endian float32s in base64"),
        ],
      },
    }),
  },
  model: stringSchema(),
  usage: objectSchema({ prompt_tokens: { type: "integer" }, total_tokens: { type: "integer" } }),
});

/** The answer in OpenAI's shape: each vector as floats, or as base64 of its little-endian float32s. */
function embeddingListOf(embedded: EmbeddedTexts, format: CreateEmbeddingInput["encoding_format"]) {
  return {
    object: "list" as const,
    data: embedded.vectors.map((vector, index) => ({
      object: "embedding" as const,
      index,
      embedding: format === "base64" ? base64OfFloat32s(vector) : Array.from(vector),
    })),
    model: embedded.model,
    usage: embedded.usage,
  };
}

/**
 * `POST /api/v1/llm/embeddings`: OpenAI's embeddings, through the model-call
 * pipeline (`embedTexts`: the key's model allowlist, budgets on the input
 * tokens, routing across the deployments that can embed, usage), with the
 * budget windows' rate-limit headers.
 */
export const createEmbedding = modelRoute({
  method: "POST",
  path: "/api/v1/llm/embeddings",
  operationId: "createEmbedding",
  summary: "Embedding vectors of texts or token arrays, in OpenAI's shape",
  description:
    "At most 2,048 inputs, none empty, each at most 8,192 tokens and 300,000 in all (the token limits where the model's tokenizer is known: OpenAI's `text-embedding-*`). Deployments whose provider has no embeddings API (Anthropic) are passed over; a model with no other is 400.",
  tag: TAG,
  permission: MODEL_CALLS,
  body: createEmbeddingBody,
  bodyValidation: { prepare: withoutNulls },
  responses: { 200: { description: "One embedding per input, in order", schema: embeddingList } },
  errors: ["bad_request", "provider_rate_limited", "bad_gateway", "gateway_timeout"],
  handler: async ({ body: input, caller, res }, deps: EmbeddingCallDeps) => {
    const signal = abortOnClose(res); // the caller going away stops the provider's work
    const embedded = await embedTexts(deps, caller, input, signal);
    res.set(budgetHeaders(embedded.windows));
    res.json(embeddingListOf(embedded, input.encoding_format));
  },
});
