import type { RedisClient } from "@gw/core";
import type { FunctionCallItem, Item, MessageItem } from "../items/items.ts";

/** What the model produced: an assistant message, function calls. */
export type OutputItem = MessageItem | FunctionCallItem;

export type ResponseStatus = "in_progress" | "completed" | "incomplete" | "failed";

export interface ResponseUsage {
  input_tokens: number;
  input_tokens_details: { cached_tokens: number };
  output_tokens: number;
  output_tokens_details: { reasoning_tokens: number };
  total_tokens: number;
}

/** A function tool as the response echoes it (OpenAI's `FunctionTool`). */
export interface ResponseTool {
  type: "function";
  name: string;
  description: string | null;
  parameters: Record<string, unknown> | null;
  strict: boolean | null;
}

/** The response object (API reference §2.6, see docs/api/README.md), with the fields of OpenAI's Responses API this service fills. */
export interface ResponseObject {
  id: string;
  object: "response";
  created_at: number;
  status: ResponseStatus;
  background: false;
  completed_at: number | null;
  error: { code: "server_error" | "rate_limit_exceeded"; message: string } | null;
  incomplete_details: { reason: "max_output_tokens" | "content_filter" } | null;
  instructions: string | null;
  max_output_tokens: number | null;
  max_tool_calls: null;
  model: string;
  output: OutputItem[];
  parallel_tool_calls: boolean;
  previous_response_id: string | null;
  conversation: { id: string } | null;
  reasoning: { effort: "none" | "minimal" | "low" | "medium" | "high" | "xhigh" | null; summary: null };
  store: boolean;
  temperature: number | null;
  text: { format: Record<string, unknown>; verbosity?: "low" | "medium" | "high" };
  tool_choice: "none" | "auto" | "required" | { type: "function"; name: string };
  tools: ResponseTool[];
  top_p: number | null;
  truncation: "auto" | "disabled";
  usage: ResponseUsage | null;
  user: string | null;
  metadata: Record<string, string>;
}

const responseKey = (org: string, id: string) => `gw:resp:{${org}}:${id}`;
/** The items the caller sent with the response (its `input_items`), kept beside it. */
const inputKey = (org: string, id: string) => `gw:resp-input:{${org}}:${id}`;
/** Item id → the response whose input or output holds it, for `item_reference`s. */
const itemIndexKey = (org: string) => `gw:resp-item-index:{${org}}`;

/** Stored responses and their input items, per organization (ids are the service's own, `resp_…`). */
export class ResponseStore {
  private readonly redis: RedisClient;

  constructor(redis: RedisClient) {
    this.redis = redis;
  }

  async save(org: string, response: ResponseObject, input: Item[]): Promise<void> {
    const itemIds = [...input, ...response.output].map((i) => i.id);
    const results = await this.redis
      .multi()
      .set(responseKey(org, response.id), JSON.stringify(response))
      .set(inputKey(org, response.id), JSON.stringify(input))
      .hset(itemIndexKey(org), Object.fromEntries(itemIds.map((itemId) => [itemId, response.id])))
      .exec();
    const failed = results?.find(([err]) => err)?.[0];
    if (failed) throw failed;
  }

  async get(org: string, id: string): Promise<ResponseObject | undefined> {
    const json = await this.redis.get(responseKey(org, id));
    return json ? (JSON.parse(json) as ResponseObject) : undefined;
  }

  /** The items the response was asked with (none for responses stored before these were kept). */
  async input(org: string, id: string): Promise<Item[]> {
    const json = await this.redis.get(inputKey(org, id));
    return json ? (JSON.parse(json) as Item[]) : [];
  }

  /** The stored response whose input or output holds the item, and the item. */
  async findItem(org: string, itemId: string): Promise<{ responseId: string; item: Item } | undefined> {
    const responseId = await this.redis.hget(itemIndexKey(org), itemId);
    if (!responseId) return undefined;
    const [response, input] = await Promise.all([this.get(org, responseId), this.input(org, responseId)]);
    const item = [...input, ...(response?.output ?? [])].find((i) => i.id === itemId);
    return response && item ? { responseId, item } : undefined;
  }

  async delete(org: string, id: string): Promise<void> {
    const [response, input] = await Promise.all([this.get(org, id), this.input(org, id)]);
    const itemIds = [...input, ...(response?.output ?? [])].map((i) => i.id);
    const deleting = this.redis.multi().del(responseKey(org, id), inputKey(org, id));
    if (itemIds.length) deleting.hdel(itemIndexKey(org), ...itemIds);
    const failed = (await deleting.exec())?.find(([err]) => err)?.[0];
    if (failed) throw failed;
  }
}
