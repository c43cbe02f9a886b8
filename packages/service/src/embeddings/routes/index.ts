import { createEmbedding } from "./create-embedding.ts";

/** Every `/api/v1/llm/embeddings` route. */
export const embeddingRoutes = [createEmbedding];
