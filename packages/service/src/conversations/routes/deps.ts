import type { ResourceAuthorization, Role } from "@gw/core/authz";
import type { Clock } from "@gw/core/clock";
import { roleOn } from "../../http/roles.ts";
import type { Ids } from "../../ids.ts";
import type { ConversationStore } from "../store.ts";

/** What the conversation routes need. */
export interface ConversationRouteDeps {
  conversations: ConversationStore;
  authorization: ResourceAuthorization;
  /** The process's clock: a conversation's `created_at`. */
  clock: Clock;
  /** Its ids, stamped with the clock's time: conversations' and items'. */
  ids: Ids;
}

export const TAG = "Conversations";

/** The principal's `role` on the conversation of the path's `id`. */
export const conversationRole = (role: Role) => roleOn("conversation", role);
