import { type Item, itemChars } from "../items/items.ts";
import { estimateTokens } from "./accounting.ts";

/** How much of a conversation's history goes to the model with a turn. */
export interface ContextBudget {
  /** Earlier items at most. */
  maxItems: number;
  /** Estimated tokens of the whole prompt: instructions, the new input and the earlier items. */
  maxTokens: number;
}

export interface History {
  /** The items kept, oldest first. */
  items: Item[];
  /** Whether every earlier item fitted (nothing was dropped). */
  whole: boolean;
}

/** Earlier items, newest first, a page at a time; `hasMore` tells whether older ones follow. */
export interface NewestFirstPage {
  items: Item[];
  hasMore: boolean;
}

/**
 * The newest earlier items that fit the budget beside `sentChars` (what goes
 * to the model anyway: instructions, the new input), oldest first. Whole
 * items, without gaps: the first one that does not fit ends the history, and
 * nothing older is read. A tool output at the start whose call was dropped
 * goes too: alone it means nothing.
 */
export async function fitHistory(
  pages: AsyncIterable<NewestFirstPage>,
  sentChars: number,
  budget: ContextBudget,
): Promise<History> {
  const kept: Item[] = [];
  let chars = sentChars;
  let whole = true;
  fill: for await (const page of pages) {
    for (const [index, item] of page.items.entries()) {
      chars += itemChars(item);
      if (estimateTokens(chars) > budget.maxTokens) {
        whole = false;
        break fill;
      }
      kept.push(item);
      if (kept.length === budget.maxItems) {
        whole = index === page.items.length - 1 && !page.hasMore;
        break fill;
      }
    }
  }
  kept.reverse();
  while (kept[0]?.type === "function_call_output") kept.shift();
  return { items: kept, whole };
}
