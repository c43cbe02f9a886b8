import { createHash } from "node:crypto";
import { useTestVectorDatabase } from "@gw/test-kit";
import { expect, vi } from "vitest";
import type { Caller } from "../src/budgets/admit-model-call.ts";
import type { ServiceOptions } from "../src/server.ts";
import type { Embedder } from "../src/vector-stores/ingestion/embedder.ts";
import type { IngestionHooks } from "../src/vector-stores/ingestion/worker.ts";
import { type Stack, useStack } from "./stack.ts";

export const VECTOR_STORES = "/api/v1/llm/vector_stores";
/** Width of the test embedder's vectors. */
export const WIDTH = 64;

/**
 * Embeddings that carry meaning, as the fake provider's do: each word of a
 * text counts in the dimension its hash picks, so texts sharing words point
 * the same way. Deterministic; never all zero.
 */
export function wordVector(text: string, width = WIDTH): number[] {
  const v = new Array<number>(width).fill(0);
  v[0] = 1e-3;
  for (const word of text.toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? [])
    v[createHash("sha256").update(word).digest().readUInt32BE(0) % width]! += 1;
  return v;
}

/** An embedder standing for the embedding model (outside the project): what it was asked, as whom. */
export interface TestEmbedder extends Embedder {
  calls: { caller: Caller; model: string; texts: string[] }[];
}

export function testEmbedder(): TestEmbedder {
  const calls: TestEmbedder["calls"] = [];
  return {
    calls,
    async embed(request) {
      calls.push(request);
      return {
        vectors: request.texts.map((t) => wordVector(t)),
        tokens: request.texts.reduce((n, t) => n + t.length, 0),
      };
    },
  };
}

/** The stack with a vector database of its own, the test embedder and ingestion hooks. */
export function useVectorStack(
  options: { env?: Record<string, string>; hooks?: IngestionHooks; serviceOptions?: ServiceOptions } = {},
): { stack: Stack; embedder: TestEmbedder } {
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
    vectorStores: { embedder, hooks: options.hooks, ...options.serviceOptions?.vectorStores },
  });
  return { stack, embedder };
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
