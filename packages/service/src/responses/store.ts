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

/** The response object (spec 2.6), with the fields of OpenAI's Responses API this service fills. */
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

/** Stored responses and their input items, per organization (ids are the service's own, `resp_…`). */
export class ResponseStore {
  private readonly redis: RedisClient;

  constructor(redis: RedisClient) {
    this.redis = redis;
  }

  async save(org: string, response: ResponseObject, input: Item[]): Promise<void> {
    const results = await this.redis
      .multi()
      .set(responseKey(org, response.id), JSON.stringify(response))
      .set(inputKey(org, response.id), JSON.stringify(input))
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

  async delete(org: string, id: string): Promise<void> {
    await this.redis.del(responseKey(org, id), inputKey(org, id));
  }
}
