/**
 * Token counts of what is sent to a model, before it is sent: an upper
 * bound that is exact for ordinary text, and whose cost is bounded for any
 * text. Budgets reserve these counts, and `POST /responses/input_tokens`
 * answers with them (docs/api/rate-limits.md, "Token and spend budgets": counting the prompt).
 *
 * - Models of a known family (OpenAI's o200k_base and cl100k_base, from
 *   `gpt-tokenizer`): the text is split into the encoding's own pieces (its
 *   pre-tokenization regex; byte-pair merges never cross a piece) and each
 *   piece is encoded on its own, so the sum is the tokenizer's exact count.
 *   Byte-pair encoding is quadratic in a piece's length (a long run of CJK
 *   characters, emoji or spaces is one piece), so a piece longer than
 *   `MAX_ENCODED_PIECE_CHARS` counts as its UTF-8 bytes instead: a
 *   byte-level encoding never has more tokens than bytes.
 * - Other models: the UTF-8 bytes of the text, an upper bound for any
 *   byte-level tokenizer whatever the script.
 *
 * The counting yields to the event loop every `SLICE_CHARS` characters, so
 * a large prompt never holds other requests up for more than one slice.
 */
import { countTokens as cl100k } from "gpt-tokenizer/encoding/cl100k_base";
import { countTokens as o200k } from "gpt-tokenizer/encoding/o200k_base";
import { CL100K_TOKEN_SPLIT_REGEX, O200K_TOKEN_SPLIT_REGEX } from "gpt-tokenizer/encodingParams/constants";
import type { ChatRequest } from "./chat.ts";
import { chatBody } from "./wire.ts";

export type Tokenizer = "o200k_base" | "cl100k_base" | "utf8_bytes";

/**
 * Tokens per message beyond its text (role and framing) and for the priming
 * of the answer, as OpenAI counts chat prompts.
 */
const TOKENS_PER_MESSAGE = 3;
const TOKENS_PER_ROLE = 1;
const REPLY_PRIMING_TOKENS = 3;

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

const ENCODINGS = {
  o200k_base: { count: o200k, split: O200K_TOKEN_SPLIT_REGEX },
  cl100k_base: { count: cl100k, split: CL100K_TOKEN_SPLIT_REGEX },
} as const;

/**
 * The encoding of a model's family: o200k_base for GPT-4o, GPT-4.1, GPT-4.5,
 * GPT-5, o1, o3, o4 and gpt-oss; cl100k_base for GPT-4 and GPT-3.5; otherwise
 * UTF-8 bytes. A provider prefix (`openai/gpt-4o`) is ignored.
 */
export function tokenizerOf(model: string): Tokenizer {
  const name = model.toLowerCase().split("/").at(-1)!;
  if (/^(gpt-4o|gpt-4\.1|gpt-4\.5|gpt-5|gpt-oss|o1|o3|o4|chatgpt-4o|codex)/.test(name)) return "o200k_base";
  if (/^(gpt-4|gpt-3\.5|gpt-35)/.test(name)) return "cl100k_base";
  return "utf8_bytes";
}

/** Hands the event loop back every `SLICE_CHARS` characters counted. */
class Pacer {
  private since = 0;
  async advance(chars: number): Promise<void> {
    this.since += chars;
    if (this.since < SLICE_CHARS) return;
    this.since = 0;
    await new Promise<void>((resolve) => setImmediate(resolve));
  }
}

const utf8Bytes = (text: string) => Buffer.byteLength(text, "utf8");

async function countWith(tokenizer: Tokenizer, text: string, pacer: Pacer): Promise<number> {
  if (text === "") return 0;
  if (tokenizer === "utf8_bytes") {
    // Linear and native; still paced, so a prompt of many large parts yields between them.
    await pacer.advance(text.length);
    return utf8Bytes(text);
  }
  const { count, split } = ENCODINGS[tokenizer];
  if (text.length <= MAX_ENCODED_PIECE_CHARS) return count(text, AS_TEXT); // no piece can be longer
  const pieces = new RegExp(split.source, split.flags); // its own lastIndex
  let tokens = 0;
  // Runs of short pieces are encoded together (a substring cut at piece boundaries splits into the same pieces).
  let start = 0;
  const flush = async (end: number) => {
    if (end > start) tokens += count(text.slice(start, end), AS_TEXT);
    await pacer.advance(end - start);
    start = end;
  };
  for (let match = pieces.exec(text); match !== null; match = pieces.exec(text)) {
    const piece = match[0];
    if (piece === "") {
      pieces.lastIndex++;
      continue;
    }
    if (piece.length > MAX_ENCODED_PIECE_CHARS) {
      await flush(match.index);
      tokens += utf8Bytes(piece);
      start = match.index + piece.length;
      await pacer.advance(piece.length);
    } else if (pieces.lastIndex - start >= SLICE_CHARS) {
      await flush(pieces.lastIndex);
    }
  }
  await flush(text.length);
  return tokens;
}

/** Tokens of a text for `model` (an upper bound, exact for ordinary text: see the module's comment). */
export function countTokens(model: string, text: string): Promise<number> {
  return countWith(tokenizerOf(model), text, new Pacer());
}

/**
 * Tokens of a whole prompt as it goes to the provider: every message (its
 * text, tool calls and framing), and everything else of the request that
 * the model reads, as the JSON sent (tools' definitions, a `text.format` /
 * `response_format` JSON schema, `tool_choice`, and any field added later),
 * plus the priming of the answer.
 */
export async function countPromptTokens(request: ChatRequest): Promise<number> {
  const tokenizer = tokenizerOf(request.model);
  const pacer = new Pacer();
  const count = (text: string) => countWith(tokenizer, text, pacer);
  let tokens = REPLY_PRIMING_TOKENS;
  for (const message of request.messages) {
    tokens += TOKENS_PER_MESSAGE + TOKENS_PER_ROLE + (await count(message.content));
    for (const call of message.toolCalls ?? [])
      tokens += (await count(call.name)) + (await count(call.arguments)) + TOKENS_PER_MESSAGE;
    if (message.toolCallId) tokens += await count(message.toolCallId);
  }
  const { model: _model, messages: _messages, max_tokens: _max, ...rest } = chatBody(request);
  if (Object.keys(rest).length > 0) tokens += await count(JSON.stringify(rest));
  return tokens;
}
