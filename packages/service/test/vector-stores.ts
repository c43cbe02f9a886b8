import { useTestVectorDatabase } from "@gw/test-kit";
import { expect, vi } from "vitest";
import type { ServiceOptions } from "../src/server.ts";
import type { IngestionHooks } from "../src/vector-stores/ingestion/worker.ts";
import { type Stack, useStack } from "./stack.ts";
import { type TestEmbedder, testEmbedder, wordVector } from "./test-embedder.ts";

export { type TestEmbedder, testEmbedder, WIDTH, wordVector } from "./test-embedder.ts";

export const VECTOR_STORES = "/api/v1/llm/vector_stores";
/** The stack with a vector database of its own, the test embedder and ingestion hooks. */
export function useVectorStack(
  options: {
    env?: Record<string, string>;
    hooks?: IngestionHooks;
    serviceOptions?: ServiceOptions;
    /** Embed through the model-call pipeline and the fake provider, as production does, not the test embedder. */
    pipeline?: boolean;
  } = {},
): { stack: Stack; embedder: TestEmbedder; vectorDatabase: { url: string } } {
  const vectors = useTestVectorDatabase();
  const embedder = testEmbedder();
  const env = {
    VECTOR_DATABASE_MAX_CONNECTIONS: "1",
    ...options.env,
    // Read when the stack starts, after the vector database has.
    get VECTOR_DATABASE_URL() {
      return vectors.url;
    },
  };
  const stack = useStack(env, {}, undefined, "single", {
    ...options.serviceOptions,
    vectorStores: {
      ...(options.pipeline ? {} : { embedder }),
      hooks: options.hooks,
      ...options.serviceOptions?.vectorStores,
    },
  });
  return { stack, embedder, vectorDatabase: vectors };
}

/** A store file once its ingestion is over (any status but in_progress). */
export async function settled(
  stack: Stack,
  secret: string,
  storeId: string,
  fileId: string,
  user = "alice",
): Promise<Record<string, unknown>> {
  let file: Record<string, unknown> = {};
  await vi.waitFor(
    async () => {
      const res = await stack.call(secret, `${VECTOR_STORES}/${storeId}/files/${fileId}`, { user });
      expect(res.status).toBe(200);
      file = await res.json();
      expect(file.status).not.toBe("in_progress");
    },
    { timeout: 20_000, interval: 50 },
  );
  return file;
}

/** The texts of the store's chunks of `fileId`, in order, as the vector index holds them (all readable). */
export async function chunksOf(
  stack: Stack,
  org: string,
  storeId: string,
  text = "anything",
): Promise<{ fileId: string; text: string; attributes: unknown }[]> {
  const hits = await stack.vectorStores.index.search({
    org,
    vectorStoreIds: [storeId],
    embedding: wordVector(text),
    limit: 1_000,
    readable: { kind: "decide", decide: async (ids) => new Set(ids) },
  });
  return hits
    .sort((a, b) => (a.fileId < b.fileId ? -1 : a.fileId > b.fileId ? 1 : a.chunkIndex - b.chunkIndex))
    .map((h) => ({ fileId: h.fileId, text: h.text, attributes: h.attributes }));
}
