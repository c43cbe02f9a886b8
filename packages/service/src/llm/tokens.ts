/**
 * Token counts of what is sent to a model, before it is sent: with the
 * model family's own tokenizer where one is known (OpenAI's o200k_base and
 * cl100k_base encodings, from `gpt-tokenizer`), else a documented estimate.
 * Budgets reserve these counts, and `POST /responses/input_tokens` answers
 * with them.
 */
import { countTokens as cl100k } from "gpt-tokenizer/encoding/cl100k_base";
import { countTokens as o200k } from "gpt-tokenizer/encoding/o200k_base";
import type { ChatMessage, FunctionTool } from "./chat.ts";

export type Tokenizer = "o200k_base" | "cl100k_base" | "estimate";

/**
 * Tokens per message beyond its text (role and framing) and for the priming
 * of the answer, as OpenAI counts chat prompts.
 */
const TOKENS_PER_MESSAGE = 3;
const TOKENS_PER_ROLE = 1;
const REPLY_PRIMING_TOKENS = 3;

/** Characters per token in the estimate for other models: 3, which overcounts English (about 4) so that reservations hold. */
export const ESTIMATE_CHARS_PER_TOKEN = 3;

/**
 * The encoding of a model's family: o200k_base for GPT-4o, GPT-4.1, GPT-4.5,
 * GPT-5, o1, o3, o4 and gpt-oss; cl100k_base for GPT-4 and GPT-3.5; otherwise
 * the estimate. A provider prefix (`openai/gpt-4o`) is ignored.
 */
export function tokenizerOf(model: string): Tokenizer {
  const name = model.toLowerCase().split("/").at(-1)!;
  if (/^(gpt-4o|gpt-4\.1|gpt-4\.5|gpt-5|gpt-oss|o1|o3|o4|chatgpt-4o|codex)/.test(name)) return "o200k_base";
  if (/^(gpt-4|gpt-3\.5|gpt-35)/.test(name)) return "cl100k_base";
  return "estimate";
}

/** Tokens of a text for `model`. */
export function countTokens(model: string, text: string): number {
  if (text === "") return 0;
  switch (tokenizerOf(model)) {
    case "o200k_base":
      return o200k(text);
    case "cl100k_base":
      return cl100k(text);
    default:
      return Math.ceil(text.length / ESTIMATE_CHARS_PER_TOKEN);
  }
}

/**
 * Tokens of a whole prompt for `model`: every message (its text, tool calls
 * and framing), the tools' definitions (as JSON), and the priming of the
 * answer.
 */
export function countPromptTokens(
  model: string,
  messages: ChatMessage[],
  tools: FunctionTool[] = [],
): number {
  let tokens = REPLY_PRIMING_TOKENS;
  for (const message of messages) {
    tokens += TOKENS_PER_MESSAGE + TOKENS_PER_ROLE + countTokens(model, message.content);
    for (const call of message.toolCalls ?? [])
      tokens += countTokens(model, call.name) + countTokens(model, call.arguments) + TOKENS_PER_MESSAGE;
    if (message.toolCallId) tokens += countTokens(model, message.toolCallId);
  }
  if (tools.length > 0) tokens += countTokens(model, JSON.stringify(tools));
  return tokens;
}
