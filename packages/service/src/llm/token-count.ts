/**
 * The counting itself, with nothing else loaded: `tokens.ts` drives it on
 * the event loop, in slices, and `token-worker.ts` in a worker thread, in
 * one go. See `tokens.ts` for what is counted and why it is an upper bound.
 */
import { encoding, piecePattern } from "./encodings.ts";

export type Tokenizer = "o200k_base" | "cl100k_base" | "utf8_bytes";

/**
 * Pieces longer than this (in UTF-16 units) count as their UTF-8 bytes: at
 * 256 the worst piece (emoji) encodes in about 0.1 ms, so a 1 MiB body costs
 * about 0.1 s of CPU whatever it holds, in slices (see `test/bench`).
 */
export const MAX_ENCODED_PIECE_CHARS = 256;

/** Characters counted between two yields to the event loop (a slice costs a few milliseconds at worst). */
export const SLICE_CHARS = 8 * 1024;

/** Special tokens (`<|endoftext|>`) in a caller's text are text, as providers read them. */
const AS_TEXT = { disallowedSpecial: new Set<string>() };

/** Characters counted since the last yield, across the texts of one prompt. */
export interface Slices {
  since: number;
}

const utf8Bytes = (text: string) => Buffer.byteLength(text, "utf8");

/**
 * Counts `text`, stopping (a `yield`) each time a slice's worth of
 * characters has been counted since the last stop; returns the count. The
 * caller decides what a stop is: a turn of the event loop, or nothing.
 */
export function* counting(tokenizer: Tokenizer, text: string, slices: Slices): Generator<void, number> {
  if (text === "") return 0;
  function* advance(chars: number): Generator<void, void> {
    slices.since += chars;
    if (slices.since < SLICE_CHARS) return;
    slices.since = 0;
    yield;
  }
  if (tokenizer === "utf8_bytes") {
    // Linear and native; still paced, so a prompt of many large parts yields between them.
    yield* advance(text.length);
    return utf8Bytes(text);
  }
  const { countTokens: count } = encoding(tokenizer);
  const split = piecePattern(tokenizer);
  if (text.length <= MAX_ENCODED_PIECE_CHARS) return count(text, AS_TEXT); // no piece can be longer
  const pieces = new RegExp(split.source, split.flags); // its own lastIndex
  let tokens = 0;
  // Runs of short pieces are encoded together (a substring cut at piece boundaries splits into the same pieces).
  let start = 0;
  function* flush(end: number): Generator<void, void> {
    if (end > start) tokens += count(text.slice(start, end), AS_TEXT);
    const chars = end - start;
    start = end;
    yield* advance(chars);
  }
  for (let match = pieces.exec(text); match !== null; match = pieces.exec(text)) {
    const piece = match[0];
    if (piece === "") {
      pieces.lastIndex++;
      continue;
    }
    if (piece.length > MAX_ENCODED_PIECE_CHARS) {
      yield* flush(match.index);
      tokens += utf8Bytes(piece);
      start = match.index + piece.length;
      yield* advance(piece.length);
    } else if (pieces.lastIndex - start >= SLICE_CHARS) {
      yield* flush(pieces.lastIndex);
    }
  }
  yield* flush(text.length);
  return tokens;
}

/** The tokens of all `texts`, counted in one go (in a worker thread: nothing else waits for its turns). */
export function countAllNow(tokenizer: Tokenizer, texts: readonly string[]): number {
  const slices = { since: 0 };
  let tokens = 0;
  for (const text of texts) {
    const steps = counting(tokenizer, text, slices);
    let step = steps.next();
    while (!step.done) step = steps.next();
    tokens += step.value;
  }
  return tokens;
}
