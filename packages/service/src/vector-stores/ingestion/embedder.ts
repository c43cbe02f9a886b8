import type { Caller } from "../../budgets/admit-model-call.ts";

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
