import { createHash } from "node:crypto";
import type { Caller } from "../src/budgets/admit-model-call.ts";
import type { Embedder } from "../src/vector-stores/ingestion/embedder.ts";

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
