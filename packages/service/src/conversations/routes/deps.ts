import type { ResourceAuthorization, Role } from "@gw/core/authz";
import { roleOn } from "../../http/roles.ts";
import type { ConversationStore } from "../store.ts";

/** What the conversation routes need. */
export interface ConversationRouteDeps {
  conversations: ConversationStore;
  authorization: ResourceAuthorization;
}

export const TAG = "Conversations";

/** The principal's `role` on the conversation of the path's `id`. */
export const conversationRole = (role: Role) => roleOn("conversation", role);
