import type { ResourceRef } from "@gw/core/authz";
import { AppError } from "@gw/core/errors";
import type { Principal } from "@gw/core/principal";
import type { ConversationStore } from "../conversations/store.ts";
import type { Item } from "../items/items.ts";
import type { ResponseStore } from "./store.ts";

/** A stored item an `item_reference` names, and where it is kept (the principal needs reader on one of them). */
export interface ReferencedItem {
  item: Item;
  places: ResourceRef[];
}

/**
 * The stored item an `item_reference` names, with the places that keep it:
 * the input or output of a response, a conversation. Whether the principal
 * may read one of them is checked with the rest of the turn's context (see
 * `prepareTurn`); an id kept nowhere is 404, exactly as one it cannot read.
 */
export async function findReferencedItem(
  deps: { responses: ResponseStore; conversations: ConversationStore },
  principal: Principal,
  id: string,
): Promise<ReferencedItem> {
  const [ofResponse, ofConversation] = await Promise.all([
    deps.responses.findItem(principal.org, id),
    deps.conversations.findItem(principal.org, id),
  ]);
  const item = ofResponse?.item ?? ofConversation?.item;
  if (!item) throw unreadableItem(id);
  const places: ResourceRef[] = [];
  if (ofResponse) places.push({ type: "response", id: ofResponse.responseId });
  if (ofConversation) places.push({ type: "conversation", id: ofConversation.conversationId });
  return { item, places };
}

/** 404 for an item the principal cannot read, the same as for one that does not exist. */
export const unreadableItem = (id: string) => new AppError("not_found", `No item ${id}`, { param: "input" });
