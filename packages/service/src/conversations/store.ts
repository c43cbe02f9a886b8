import type { RedisClient } from "@gw/core";
import type { Item } from "../items/items.ts";

export interface Conversation {
  id: string;
  object: "conversation";
  created_at: number;
  metadata: Record<string, string>;
}

export interface ItemPage {
  items: Item[];
  hasMore: boolean;
}

const recordKey = (org: string, id: string) => `gw:conv:{${org}}:${id}`;
/** Item ids by position (a sorted set scored 1, 2, 3…), so a page starts anywhere in one step. */
const orderKey = (org: string, id: string) => `gw:conv-order:{${org}}:${id}`;
/** Item id → item JSON. */
const itemsKey = (org: string, id: string) => `gw:conv-item:{${org}}:${id}`;
/** Where items were kept before they could be paged: a list, moved to the two keys above when next touched. */
const legacyKey = (org: string, id: string) => `gw:conv-items:{${org}}:${id}`;

/** Item id → the conversation holding it, for `item_reference`s: one hash per organization. */
const itemIndexKey = (org: string) => `gw:conv-item-index:{${org}}`;

const keys = (org: string, id: string) => [legacyKey(org, id), orderKey(org, id), itemsKey(org, id)];

// KEYS: legacy list, order, items.
const MIGRATE = `
if redis.call('EXISTS', KEYS[1]) == 1 then
  for i, json in ipairs(redis.call('LRANGE', KEYS[1], 0, -1)) do
    local id = cjson.decode(json).id
    redis.call('ZADD', KEYS[2], i, id)
    redis.call('HSET', KEYS[3], id, json)
  end
  redis.call('DEL', KEYS[1])
end
`;

// KEYS[4]: the item index. ARGV: conversation id, then id, json, id, json…
const APPEND = `${MIGRATE}
local top = redis.call('ZREVRANGE', KEYS[2], 0, 0, 'WITHSCORES')
local position = tonumber(top[2] or '0')
for i = 2, #ARGV, 2 do
  position = position + 1
  redis.call('ZADD', KEYS[2], position, ARGV[i])
  redis.call('HSET', KEYS[3], ARGV[i], ARGV[i + 1])
  redis.call('HSET', KEYS[4], ARGV[i], ARGV[1])
end
`;

// ARGV: after ('' for the start), 'asc' | 'desc', count. Returns up to count item JSONs, or nil when
// 'after' is not an item of this conversation.
const PAGE = `${MIGRATE}
local after, desc, count = ARGV[1], ARGV[2] == 'desc', tonumber(ARGV[3])
local ids
if after == '' then
  if desc then ids = redis.call('ZREVRANGE', KEYS[2], 0, count - 1)
  else ids = redis.call('ZRANGE', KEYS[2], 0, count - 1) end
else
  local position = redis.call('ZSCORE', KEYS[2], after)
  if not position then return false end
  if desc then ids = redis.call('ZREVRANGEBYSCORE', KEYS[2], '(' .. position, '-inf', 'LIMIT', 0, count)
  else ids = redis.call('ZRANGEBYSCORE', KEYS[2], '(' .. position, '+inf', 'LIMIT', 0, count) end
end
if #ids == 0 then return {} end
return redis.call('HMGET', KEYS[3], unpack(ids))
`;

// ARGV: item id. Returns its JSON, or nil.
const GET_ITEM = `${MIGRATE}
return redis.call('HGET', KEYS[3], ARGV[1])
`;

// KEYS[4]: the item index. ARGV: item id. Returns 1 if it was there.
const DELETE_ITEM = `${MIGRATE}
if redis.call('ZREM', KEYS[2], ARGV[1]) == 0 then return 0 end
redis.call('HDEL', KEYS[3], ARGV[1])
redis.call('HDEL', KEYS[4], ARGV[1])
return 1
`;

// KEYS[4]: the item index, KEYS[5]: the record. Removes the conversation, its items and their index entries.
const DELETE = `${MIGRATE}
local ids = redis.call('HKEYS', KEYS[3])
for i = 1, #ids, 1000 do
  redis.call('HDEL', KEYS[4], unpack(ids, i, math.min(i + 999, #ids)))
end
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[5])
`;

/**
 * Conversations and their items in Redis, per organization (ids are the
 * service's own, `conv_…`). Items are read a page at a time, never all at once.
 */
export class ConversationStore {
  private readonly redis: RedisClient;

  constructor(redis: RedisClient) {
    this.redis = redis;
  }

  async save(org: string, conversation: Conversation): Promise<void> {
    await this.redis.set(recordKey(org, conversation.id), JSON.stringify(conversation));
  }

  async get(org: string, id: string): Promise<Conversation | undefined> {
    const json = await this.redis.get(recordKey(org, id));
    return json ? (JSON.parse(json) as Conversation) : undefined;
  }

  /**
   * Up to `limit` items after the item `after` (or from the start) in `order`
   * (`asc`: oldest first); `undefined` if `after` is not an item of this conversation.
   */
  async page(
    org: string,
    id: string,
    options: { limit: number; order: "asc" | "desc"; after?: string | undefined },
  ): Promise<ItemPage | undefined> {
    const jsons = (await this.redis.eval(
      PAGE,
      3,
      ...keys(org, id),
      options.after ?? "",
      options.order,
      options.limit + 1, // one more tells whether there are more
    )) as (string | null)[] | null;
    if (!jsons) return undefined;
    const items = jsons.filter((j): j is string => j !== null).map((j) => JSON.parse(j) as Item);
    return { items: items.slice(0, options.limit), hasMore: items.length > options.limit };
  }

  /** The items newest first, `pageSize` at a time, each page read as the caller goes on. */
  async *newestFirst(org: string, id: string, pageSize: number): AsyncGenerator<ItemPage> {
    let after: string | undefined;
    while (true) {
      const page = await this.page(org, id, { limit: pageSize, order: "desc", after });
      if (!page) return; // the item we stood on was removed meanwhile
      yield page;
      if (!page.hasMore) return;
      after = page.items.at(-1)!.id;
    }
  }

  async append(org: string, id: string, items: Item[]): Promise<void> {
    if (items.length === 0) return;
    await this.redis.eval(
      APPEND,
      4,
      ...keys(org, id),
      itemIndexKey(org),
      id,
      ...items.flatMap((i) => [i.id, JSON.stringify(i)]),
    );
  }

  async item(org: string, id: string, itemId: string): Promise<Item | undefined> {
    const json = (await this.redis.eval(GET_ITEM, 3, ...keys(org, id), itemId)) as string | null;
    return json ? (JSON.parse(json) as Item) : undefined;
  }

  /** Whether the item was there. */
  async deleteItem(org: string, id: string, itemId: string): Promise<boolean> {
    return (await this.redis.eval(DELETE_ITEM, 4, ...keys(org, id), itemIndexKey(org), itemId)) === 1;
  }

  /** The conversation holding the item, and the item. */
  async findItem(org: string, itemId: string): Promise<{ conversationId: string; item: Item } | undefined> {
    const conversationId = await this.redis.hget(itemIndexKey(org), itemId);
    const item = conversationId ? await this.item(org, conversationId, itemId) : undefined;
    return conversationId && item ? { conversationId, item } : undefined;
  }

  async delete(org: string, id: string): Promise<void> {
    await this.redis.eval(DELETE, 5, ...keys(org, id), itemIndexKey(org), recordKey(org, id));
  }
}
