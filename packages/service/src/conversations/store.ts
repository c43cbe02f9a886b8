import { randomBytes } from "node:crypto";
import type { Redis } from "ioredis";

export interface Conversation {
  id: string;
  object: "conversation";
  created_at: number;
  metadata: Record<string, string>;
}

export interface ConversationItem {
  type: "message";
  id: string;
  status: "completed";
  role: "user" | "assistant" | "system" | "developer";
  content: { type: "input_text" | "output_text"; text: string }[];
}

export const newId = (prefix: string) => `${prefix}_${randomBytes(16).toString("hex")}`;

const recordKey = (org: string, id: string) => `gw:conv:{${org}}:${id}`;
const itemsKey = (org: string, id: string) => `gw:conv-items:{${org}}:${id}`;

/** Conversations and their items in Redis, per organization (ids are the service's own, `conv_…`). */
export class ConversationStore {
  private readonly redis: Redis;

  constructor(redis: Redis) {
    this.redis = redis;
  }

  async save(org: string, conversation: Conversation): Promise<void> {
    await this.redis.set(recordKey(org, conversation.id), JSON.stringify(conversation));
  }

  async get(org: string, id: string): Promise<Conversation | undefined> {
    const json = await this.redis.get(recordKey(org, id));
    return json ? (JSON.parse(json) as Conversation) : undefined;
  }

  async items(org: string, id: string): Promise<ConversationItem[]> {
    return (await this.redis.lrange(itemsKey(org, id), 0, -1)).map((j) => JSON.parse(j) as ConversationItem);
  }

  async append(org: string, id: string, items: ConversationItem[]): Promise<void> {
    if (items.length > 0) await this.redis.rpush(itemsKey(org, id), ...items.map((i) => JSON.stringify(i)));
  }

  async delete(org: string, id: string): Promise<void> {
    await this.redis.del(recordKey(org, id), itemsKey(org, id));
  }
}
