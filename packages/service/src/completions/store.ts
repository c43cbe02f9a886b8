import type { RedisClient } from "@gw/core";

/** A tool call as chat completions carry it. */
export interface WireToolCall {
  id: string;
  type: "function";
  function: { name: string; arguments: string };
}

export type CompletionFinishReason = "stop" | "length" | "tool_calls" | "content_filter";

/** OpenAI's `ChatCompletion`, as answered and (with `store: true`) stored. */
export interface ChatCompletionObject {
  id: string;
  object: "chat.completion";
  created: number;
  model: string;
  choices: {
    index: number;
    message: {
      role: "assistant";
      content: string | null;
      refusal: null;
      annotations: [];
      tool_calls?: WireToolCall[];
    };
    finish_reason: CompletionFinishReason;
    logprobs: null;
  }[];
  usage: {
    prompt_tokens: number;
    completion_tokens: number;
    total_tokens: number;
    prompt_tokens_details: { cached_tokens: number };
    completion_tokens_details: { reasoning_tokens: number };
  };
  service_tier: null;
  system_fingerprint: null;
  /** Kept with stored completions; changed with `POST /chat/completions/{id}`. */
  metadata: Record<string, string>;
}

/** A message the completion was asked with, as `GET /chat/completions/{id}/messages` lists it. */
export interface StoredMessage {
  id: string;
  role: "system" | "developer" | "user" | "assistant" | "tool";
  content: string | null;
  name?: string;
  tool_calls?: WireToolCall[];
  tool_call_id?: string;
  content_parts: null;
}

/**
 * Stored chat completions (`store: true`) and the messages they were asked
 * with, per organization; ids are the service's own (`chatcmpl-…`). Who may
 * read or change them is SpiceDB's (`completion` resources), not the store's.
 */
export interface CompletionStore {
  save(org: string, completion: ChatCompletionObject, messages: StoredMessage[]): Promise<void>;
  get(org: string, id: string): Promise<ChatCompletionObject | undefined>;
  /** The completions among `ids` that exist, in no particular order. */
  getMany(org: string, ids: string[]): Promise<ChatCompletionObject[]>;
  /** Replaces a stored completion's record (its metadata); false if it is gone. */
  replace(org: string, completion: ChatCompletionObject): Promise<boolean>;
  messages(org: string, id: string): Promise<StoredMessage[]>;
  delete(org: string, id: string): Promise<void>;
}

const recordKey = (org: string, id: string) => `gw:chatcmpl:{${org}}:${id}`;
const messagesKey = (org: string, id: string) => `gw:chatcmpl-messages:{${org}}:${id}`;

export class RedisCompletionStore implements CompletionStore {
  private readonly redis: RedisClient;

  constructor(redis: RedisClient) {
    this.redis = redis;
  }

  async save(org: string, completion: ChatCompletionObject, messages: StoredMessage[]): Promise<void> {
    const results = await this.redis
      .multi()
      .set(recordKey(org, completion.id), JSON.stringify(completion))
      .set(messagesKey(org, completion.id), JSON.stringify(messages))
      .exec();
    const failed = results?.find(([err]) => err)?.[0];
    if (failed) throw failed;
  }

  async get(org: string, id: string): Promise<ChatCompletionObject | undefined> {
    const json = await this.redis.get(recordKey(org, id));
    return json ? (JSON.parse(json) as ChatCompletionObject) : undefined;
  }

  async getMany(org: string, ids: string[]): Promise<ChatCompletionObject[]> {
    if (ids.length === 0) return [];
    const jsons = await this.redis.mget(ids.map((id) => recordKey(org, id)));
    return jsons.filter((j): j is string => j !== null).map((j) => JSON.parse(j) as ChatCompletionObject);
  }

  async replace(org: string, completion: ChatCompletionObject): Promise<boolean> {
    return (await this.redis.set(recordKey(org, completion.id), JSON.stringify(completion), "XX")) === "OK";
  }

  async messages(org: string, id: string): Promise<StoredMessage[]> {
    const json = await this.redis.get(messagesKey(org, id));
    return json ? (JSON.parse(json) as StoredMessage[]) : [];
  }

  async delete(org: string, id: string): Promise<void> {
    await this.redis.del(recordKey(org, id), messagesKey(org, id));
  }
}
