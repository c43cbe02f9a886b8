import type { Caller } from "../../budgets/admit-model-call.ts";
import { type EmbeddingCallDeps, embedTexts } from "../../calls/embeddings.ts";

/** Embeddings of texts, in their order, and the input tokens the call was charged. */
export interface Embedded {
  vectors: number[][];
  /** Input tokens of the call, as its usage was recorded. */
  tokens: number;
}

/**
 * Embeds texts as `caller` (the key that attached the file, and its end
 * user): through the model-call pipeline, so the key's model allowlist,
 * request windows, token and spend budgets apply and the usage is the key's.
 * The ingestion depends on this interface only.
 */
export interface Embedder {
  embed(request: { caller: Caller; model: string; texts: string[] }, signal: AbortSignal): Promise<Embedded>;
}

/** Thrown by an embedder that has no way to embed: the ingestion fails the file (`server_error`). */
export class EmbeddingsUnavailable extends Error {
  constructor() {
    super("Embeddings are not available in this deployment");
    this.name = "EmbeddingsUnavailable";
  }
}

/** The embedder of a process that cannot embed. */
export const noEmbedder: Embedder = {
  embed: () => Promise.reject(new EmbeddingsUnavailable()),
};

/** The embedder of the service and its workers: `embedTexts`, the model-call pipeline's embeddings. */
export const pipelineEmbedder = (deps: EmbeddingCallDeps): Embedder => ({
  async embed({ caller, model, texts }, signal) {
    const embedded = await embedTexts(deps, caller, { model, input: texts }, signal);
    return { vectors: embedded.vectors.map((v) => Array.from(v)), tokens: embedded.usage.prompt_tokens };
  },
});
