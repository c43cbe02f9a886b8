import type { ResourceAuthorization } from "@gw/core/authz";
import { AppError } from "@gw/core/errors";
import type { Principal } from "@gw/core/principal";
import type { ConversationStore } from "../conversations/store.ts";
import type { Item } from "../items/items.ts";
import type { ResponseStore } from "./store.ts";

/**
 * The stored item an `item_reference` names, if the principal may read
 * where it is kept: the input or output of a response, or a conversation, on
 * which it holds reader. Otherwise 404, exactly as for an id that does not
 * exist.
 */
export async function readableItem(
  deps: { authorization: ResourceAuthorization; responses: ResponseStore; conversations: ConversationStore },
  principal: Principal,
  id: string,
): Promise<Item> {
  const [ofResponse, ofConversation] = await Promise.all([
    deps.responses.findItem(principal.org, id),
    deps.conversations.findItem(principal.org, id),
  ]);
  const places = [
    ofResponse && {
      resource: { type: "response" as const, id: ofResponse.responseId },
      item: ofResponse.item,
    },
    ofConversation && {
      resource: { type: "conversation" as const, id: ofConversation.conversationId },
      item: ofConversation.item,
    },
  ];
  for (const place of places) {
    if (place && (await deps.authorization.check(principal, place.resource, "reader"))) return place.item;
  }
  throw new AppError("not_found", `No item ${id}`, { param: "input" });
}
