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
 * Where it runs: a prompt of at least `workerMinChars` characters is counted
 * by a worker thread (`token-pool.ts`), so the event loop never does work
 * that grows with a prompt; a smaller one, or any prompt when the pool has
 * no workers, on the event loop, yielding every `SLICE_CHARS` characters.
 * Both run the same code (`token-count.ts`): the count does not depend on
 * where it ran.
 */
import type { ChatRequest } from "./chat.ts";
import { counting, type Slices, type Tokenizer } from "./token-count.ts";
import { TokenPool } from "./token-pool.ts";
import { chatBody } from "./wire.ts";

export { MAX_ENCODED_PIECE_CHARS, SLICE_CHARS, type Tokenizer } from "./token-count.ts";

/**
 * Tokens per message beyond its text (role and framing) and for the priming
 * of the answer, as OpenAI counts chat prompts.
 */
const TOKENS_PER_MESSAGE = 3;
const TOKENS_PER_ROLE = 1;
const REPLY_PRIMING_TOKENS = 3;

/** Where prompts are counted (the service's `TOKEN_COUNT_*` settings). */
export interface TokenCounting {
  /** Worker threads counting large prompts; 0: every prompt on the event loop, in slices. */
  workers: number;
  /** Prompts of at least this many characters go to a worker. */
  workerMinChars: number;
  /** Longest a count may wait for a worker and run there, in milliseconds; past it, a 503. */
  timeoutMs: number;
}

/** The defaults of the service's settings, for a process that configures nothing (a test, a script). */
export const DEFAULT_TOKEN_COUNTING: TokenCounting = {
  workers: 1,
  workerMinChars: 32 * 1024,
  timeoutMs: 10_000,
};

let settings: TokenCounting = DEFAULT_TOKEN_COUNTING;
let pool: TokenPool | undefined;

/**
 * Sets where this process counts prompts (at start, from its configuration).
 * The pool is process-wide, as the tokenizer's tables are: a pool of another
 * size is closed once this is called, and the next count starts a new one.
 */
export function configureTokenCounting(next: TokenCounting): void {
  const previous = pool;
  if (previous && next.workers === settings.workers && next.timeoutMs === settings.timeoutMs) {
    settings = next;
    return;
  }
  settings = next;
  pool = undefined;
  void previous?.close();
}

const poolOf = (): TokenPool => {
  pool ??= new TokenPool(settings.workers, settings.timeoutMs);
  return pool;
};

/**
 * The encoding of a model's family: o200k_base for GPT-4o, GPT-4.1, GPT-4.5,
 * GPT-5, o1, o3, o4 and gpt-oss; cl100k_base for GPT-4, GPT-3.5 and OpenAI's
 * embedding models (`text-embedding-3-*`, `text-embedding-ada-002`); otherwise
 * UTF-8 bytes. A provider prefix (`openai/gpt-4o`) is ignored.
 */
export function tokenizerOf(model: string): Tokenizer {
  const name = model.toLowerCase().split("/").at(-1)!;
  if (/^(gpt-4o|gpt-4\.1|gpt-4\.5|gpt-5|gpt-oss|o1|o3|o4|chatgpt-4o|codex)/.test(name)) return "o200k_base";
  if (/^(gpt-4|gpt-3\.5|gpt-35|text-embedding-(3-|ada-002))/.test(name)) return "cl100k_base";
  return "utf8_bytes";
}

/** Counts on the event loop, handing it back every `SLICE_CHARS` characters. */
async function countHere(tokenizer: Tokenizer, texts: readonly string[]): Promise<number> {
  const slices: Slices = { since: 0 };
  let tokens = 0;
  for (const text of texts) {
    const steps = counting(tokenizer, text, slices);
    let step = steps.next();
    while (!step.done) {
      await new Promise<void>((resolve) => setImmediate(resolve));
      step = steps.next();
    }
    tokens += step.value;
  }
  return tokens;
}

/**
 * The tokens of `texts`: by a worker when they are large and a tokenizer
 * encodes them; else here, in slices (UTF-8 bytes are counted natively, in
 * time that does not matter beside reading the body).
 */
function countTexts(tokenizer: Tokenizer, texts: string[], tenant: string): Promise<number> {
  const chars = texts.reduce((n, t) => n + t.length, 0);
  if (tokenizer === "utf8_bytes" || settings.workers === 0 || chars < settings.workerMinChars)
    return countHere(tokenizer, texts);
  return poolOf().count(tenant, tokenizer, texts);
}

/**
 * Tokens of a text for `model` (an upper bound, exact for ordinary text: see
 * the module's comment). `tenant` (an organization) is the lane it waits in
 * for a worker.
 */
export function countTokens(model: string, text: string, tenant = ""): Promise<number> {
  return countTexts(tokenizerOf(model), [text], tenant);
}

/**
 * Tokens of each of `texts` for `model` (as `countTokens`), in order. `tenant` as for `countTokens`.
 */
export async function countEachTokens(
  model: string,
  texts: readonly string[],
  tenant = "",
): Promise<number[]> {
  const tokenizer = tokenizerOf(model);
  const counts: number[] = [];
  for (const text of texts) counts.push(await countTexts(tokenizer, [text], tenant));
  return counts;
}

/**
 * Tokens of a whole prompt as it goes to the provider: every message (its
 * text, tool calls and framing), and everything else of the request that
 * the model reads, as the JSON sent (tools' definitions, a `text.format` /
 * `response_format` JSON schema, `tool_choice`, and any field added later),
 * plus the priming of the answer. `tenant` as for `countTokens`.
 */
export async function countPromptTokens(request: ChatRequest, tenant = ""): Promise<number> {
  let framing = REPLY_PRIMING_TOKENS;
  const texts: string[] = [];
  for (const message of request.messages) {
    framing += TOKENS_PER_MESSAGE + TOKENS_PER_ROLE;
    texts.push(message.content);
    for (const call of message.toolCalls ?? []) {
      framing += TOKENS_PER_MESSAGE;
      texts.push(call.name, call.arguments);
    }
    if (message.toolCallId) texts.push(message.toolCallId);
  }
  // The number of answers and the token biases are no text the model reads (1024 biases would count thousands).
  const {
    model: _model,
    messages: _messages,
    max_tokens: _max,
    n: _n,
    logit_bias: _bias,
    ...rest
  } = chatBody(request);
  if (Object.keys(rest).length > 0) texts.push(JSON.stringify(rest));
  return framing + (await countTexts(tokenizerOf(request.model), texts, tenant));
}
