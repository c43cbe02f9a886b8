/**
 * Embeddings that carry some meaning without a model, for the development
 * provider of `pnpm start` and the test provider: a text's words, lowercased,
 * are hashed into `dimensions` buckets (FNV-1a of their UTF-8), counted, and
 * the counts scaled to length 1. Texts that share words have vectors that
 * point the same way (their cosine similarity grows with what they share);
 * texts with no word in common are orthogonal, but for collisions. The same
 * text gives the same vector everywhere, every time.
 */

/** The width of a vector when the request names no `dimensions`. */
export const DEFAULT_EMBEDDING_DIMENSIONS = 256;

/** Letters and digits in a row, in any script. */
const WORD = /[\p{L}\p{N}]+/gu;

/** FNV-1a, 32 bits, of `text`'s UTF-8 bytes. */
function fnv1a(text: string): number {
  let hash = 0x811c9dc5;
  for (const byte of Buffer.from(text, "utf8")) {
    hash ^= byte;
    hash = Math.imul(hash, 0x01000193) >>> 0;
  }
  return hash;
}

/**
 * The words of an input: a text's lowercased words (a text without any is
 * one word, itself), or a token array's ids as words.
 */
export function wordsOf(input: string | readonly number[]): string[] {
  if (typeof input !== "string") return input.map((id) => `#${id}`);
  const words = input.toLowerCase().match(WORD);
  return words ?? [input];
}

/** The vector of `input`: its words' hashed counts in `dimensions` buckets, of length 1. */
export function hashedEmbedding(
  input: string | readonly number[],
  dimensions = DEFAULT_EMBEDDING_DIMENSIONS,
): number[] {
  const vector = new Array<number>(dimensions).fill(0);
  for (const word of wordsOf(input)) vector[fnv1a(word) % dimensions]! += 1;
  const norm = Math.sqrt(vector.reduce((sum, x) => sum + x * x, 0));
  return norm === 0 ? vector : vector.map((x) => x / norm);
}

/** `vector` as OpenAI's `encoding_format: base64` carries it: its little-endian float32s, in base64. */
export function base64OfVector(vector: readonly number[]): string {
  const bytes = Buffer.alloc(vector.length * 4);
  for (const [i, x] of vector.entries()) bytes.writeFloatLE(x, i * 4);
  return bytes.toString("base64");
}
