import type { ChatMessage, Completion, ToolCall, Usage } from "./chat.ts";
import type { ReportedUsage } from "./wire.ts";

/** What a model call used: the provider's counts, or estimates when it sends none. */

/** Characters per token when the provider sends no counts (and for context budgets). */
export const estimateTokens = (chars: number) => Math.ceil(chars / 4);

/** Characters of a message as context budgets and estimates count them. */
export const charsOf = (message: ChatMessage) =>
  message.content.length +
  (message.toolCalls ?? []).reduce((n, c) => n + c.name.length + c.arguments.length, 0);

/** The provider's counts, or an estimate when it sends none. */
export function usageOf(
  reported: ReportedUsage | null | undefined,
  messages: ChatMessage[],
  text: string,
  toolCalls: ToolCall[] = [],
): Usage {
  const input = reported?.prompt_tokens ?? estimateTokens(messages.reduce((n, m) => n + charsOf(m), 0));
  const output =
    reported?.completion_tokens ?? estimateTokens(charsOf({ role: "assistant", content: text, toolCalls }));
  return { input_tokens: input, output_tokens: output, total_tokens: input + output };
}

export function usageDetailsOf(reported: ReportedUsage | null | undefined): Completion["usageDetails"] {
  const written = reported?.prompt_tokens_details?.cache_write_tokens;
  return {
    cachedTokens: reported?.prompt_tokens_details?.cached_tokens ?? 0,
    reasoningTokens: reported?.completion_tokens_details?.reasoning_tokens ?? 0,
    ...(written ? { cacheWriteTokens: written } : {}),
  };
}
