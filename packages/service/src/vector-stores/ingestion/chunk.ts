import { encoding } from "../../llm/encodings.ts";
import { tokenizerOf } from "../../llm/tokens.ts";
import type { Chunking } from "../store.ts";
import { FileRejected } from "./extract.ts";

/** The most tokens one file may have (OpenAI's limit for a vector store's file). */
export const MAX_FILE_TOKENS = 5_000_000;
/** Characters encoded between two turns of the event loop. */
const SLICE_CHARS = 16 * 1024;

/** Special tokens (`<|endoftext|>`) in a file are text. */
const AS_TEXT = { disallowedSpecial: new Set<string>() };

export interface TextChunk {
  text: string;
  tokenCount: number;
}

const turn = () => new Promise<void>((resolve) => setImmediate(resolve));

/** The encoding that counts the embedding model's tokens: its own when known (OpenAI's embedding models: cl100k_base), else cl100k_base. */
const encodingOf = (model: string) =>
  encoding(tokenizerOf(model) === "o200k_base" ? "o200k_base" : "cl100k_base");

/** The text in slices of about `SLICE_CHARS`, cut after a line (or space) where one is near, so few tokens straddle a cut. */
function* slices(text: string): Generator<string> {
  let at = 0;
  while (at < text.length) {
    let end = Math.min(at + SLICE_CHARS, text.length);
    if (end < text.length) {
      const line = text.lastIndexOf("\n", end);
      const space = text.lastIndexOf(" ", end);
      const cut = line > at + SLICE_CHARS / 2 ? line + 1 : space > at + SLICE_CHARS / 2 ? space + 1 : end;
      end = cut;
    }
    yield text.slice(at, end);
    at = end;
  }
}

/**
 * Cuts a text into chunks of at most `maxChunkSizeTokens` tokens of the
 * embedding model, each beginning `maxChunkSizeTokens - chunkOverlapTokens`
 * tokens after the one before (OpenAI's static strategy). The text is
 * encoded a slice at a time, handing the event loop back between slices;
 * past `MAX_FILE_TOKENS` the file is refused (`invalid_file`).
 */
export async function chunkText(text: string, chunking: Chunking, model: string): Promise<TextChunk[]> {
  const encoding = encodingOf(model);
  const tokens: number[] = [];
  for (const slice of slices(text)) {
    for (const token of encoding.encode(slice, AS_TEXT)) tokens.push(token);
    if (tokens.length > MAX_FILE_TOKENS)
      throw new FileRejected(
        "invalid_file",
        `The file has more than the ${MAX_FILE_TOKENS} tokens a file may have`,
      );
    await turn();
  }
  const { maxChunkSizeTokens: size, chunkOverlapTokens: overlap } = chunking;
  const step = size - overlap;
  const chunks: TextChunk[] = [];
  for (let start = 0; start < tokens.length; start += step) {
    const window = tokens.slice(start, start + size);
    const chunk = encoding.decode(window);
    if (chunk.trim() !== "") chunks.push({ text: chunk, tokenCount: window.length });
    if (start + size >= tokens.length) break;
    if (chunks.length % 256 === 0) await turn();
  }
  return chunks;
}
