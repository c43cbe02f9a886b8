import type { ConversationItem } from "../conversations/store.ts";
import { type ChatMessage, estimateTokens } from "./provider.ts";

/** How much of a conversation's history goes to the model with a turn. */
export interface ContextBudget {
  /** Earlier items at most. */
  maxItems: number;
  /** Estimated tokens of the whole prompt: instructions, the new input and the earlier items. */
  maxTokens: number;
}

export const messageOf = (item: ConversationItem): ChatMessage => ({
  role: item.role,
  content: item.content.map((c) => c.text).join(""),
});

const charsOf = (messages: ChatMessage[]) => messages.reduce((n, m) => n + m.content.length, 0);

/**
 * The newest earlier items that fit the budget beside `sent` (what goes to the
 * model anyway), oldest first. Whole items, without gaps: the first one that
 * does not fit ends the history, and nothing older is read.
 */
export async function fitHistory(
  newestFirst: AsyncIterable<ConversationItem>,
  sent: ChatMessage[],
  budget: ContextBudget,
): Promise<ChatMessage[]> {
  const kept: ChatMessage[] = [];
  let chars = charsOf(sent);
  for await (const item of newestFirst) {
    const message = messageOf(item);
    chars += message.content.length;
    if (estimateTokens(chars) > budget.maxTokens) break;
    kept.push(message);
    if (kept.length === budget.maxItems) break;
  }
  return kept.reverse();
}
