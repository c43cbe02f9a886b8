/** Width of `wordVector`'s vectors. */
export const WORD_VECTOR_WIDTH = 64;

/**
 * A hashed bag of words: texts that share words point the same way, so a
 * search finds what it should (as the fake provider's embeddings do).
 */
export function wordVector(text: string): number[] {
  const v = new Array<number>(WORD_VECTOR_WIDTH).fill(0);
  v[0] = 0.01; // never all zeros
  for (const word of text.toLowerCase().match(/[a-z0-9]+/g) ?? []) {
    let h = 2166136261;
    for (const c of word) h = Math.imul(h ^ c.charCodeAt(0), 16777619);
    v[1 + ((h >>> 0) % (WORD_VECTOR_WIDTH - 1))]! += 1;
  }
  return v;
}
