import type { Route } from "@gw/core/http";
import { addItems } from "./add-items.ts";
import { createConversation } from "./create-conversation.ts";
import { deleteConversation } from "./delete-conversation.ts";
import { deleteItem } from "./delete-item.ts";
import type { ConversationRouteDeps } from "./deps.ts";
import { getConversation } from "./get-conversation.ts";
import { getItem } from "./get-item.ts";
import { listItems } from "./list-items.ts";
import { updateConversation } from "./update-conversation.ts";

export type { ConversationRouteDeps };

/** Every `/api/v1/llm/conversations` route. */
export const conversationRoutes: Route<ConversationRouteDeps>[] = [
  createConversation,
  getConversation,
  updateConversation,
  deleteConversation,
  listItems,
  addItems,
  getItem,
  deleteItem,
];
