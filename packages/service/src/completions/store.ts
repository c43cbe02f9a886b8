import { type Clock, retentionCutoff } from "@gw/core/clock";
import { type Postgres, postgresCanHold } from "@gw/core/postgres";
import { stringified } from "@gw/core/turns";
import type { TokenLogprob } from "../llm/provider.ts";

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
    /** The output tokens' log probabilities, when `logprobs: true` asked for them. */
    logprobs: { content: TokenLogprob[]; refusal: null } | null;
  }[];
  usage: {
    prompt_tokens: number;
    completion_tokens: number;
    total_tokens: number;
    prompt_tokens_details: { cached_tokens: number };
    completion_tokens_details: { reasoning_tokens: number };
  };
  /** The `service_tier` the request asked for, as the Responses API echoes it. */
  service_tier: string | null;
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
  /** The text parts it was sent in, when it was sent in parts (its `content` is their text run together); else null. */
  content_parts: { type: "text"; text: string }[] | null;
  /** OpenAI's message type requires it; a stored request message refused nothing. */
  refusal?: null;
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
  /** The messages it was asked with; `undefined` if the completion is gone. */
  messages(org: string, id: string): Promise<StoredMessage[] | undefined>;
  delete(org: string, id: string): Promise<void>;
}

export interface CompletionStoreOptions {
  /** Its wall time stamps and expires completions. */
  clock: Clock;
  /** A stored completion (with its messages) is gone this long after it was stored; unset: never. */
  retentionMs?: number | undefined;
}

/** Rows still within retention: `$3` is the cutoff (`null`: none expire). */
const LIVE = "($3::timestamptz IS NULL OR stored_at > $3)";

/**
 * Stored chat completions in PostgreSQL's `chat_completions`, one row each
 * (the completion, its messages), every read along the primary key
 * `(org, id)`. As stored responses: a completion older than `retentionMs` is
 * absent from every read at once; the retention sweeper deletes it later.
 */
export class PostgresCompletionStore implements CompletionStore {
  private readonly db: Postgres;
  private readonly clock: Clock;
  private readonly retentionMs: number | undefined;

  constructor(db: Postgres, options: CompletionStoreOptions) {
    this.db = db;
    this.clock = options.clock;
    this.retentionMs = options.retentionMs;
  }

  /** Completions stored before this are expired (`null`: none expire). */
  private cutoff(): Date | null {
    return retentionCutoff(this.clock, this.retentionMs);
  }

  async save(org: string, completion: ChatCompletionObject, messages: StoredMessage[]): Promise<void> {
    // Large messages are serialised in a turn of their own (`@gw/core/turns`).
    const [body, messagesJson] = [await stringified(completion), await stringified(messages)];
    await this.db.query(
      `INSERT INTO chat_completions (org, id, body, messages, stored_at)
       VALUES ($1, $2, $3::json, $4::json, $5)`,
      [org, completion.id, body, messagesJson, new Date(this.clock.wall())],
    );
  }

  async get(org: string, id: string): Promise<ChatCompletionObject | undefined> {
    if (!postgresCanHold(id)) return undefined;
    const { rows } = await this.db.query<{ body: ChatCompletionObject }>(
      `SELECT body FROM chat_completions WHERE org = $1 AND id = $2 AND ${LIVE}`,
      [org, id, this.cutoff()],
    );
    return rows[0]?.body;
  }

  async getMany(org: string, ids: string[]): Promise<ChatCompletionObject[]> {
    if (ids.length === 0) return [];
    const { rows } = await this.db.query<{ body: ChatCompletionObject }>(
      `SELECT body FROM chat_completions WHERE org = $1 AND id = ANY($2::text[]) AND ${LIVE}`,
      [org, ids, this.cutoff()],
    );
    return rows.map((r) => r.body);
  }

  async replace(org: string, completion: ChatCompletionObject): Promise<boolean> {
    const { rowCount } = await this.db.query(
      `UPDATE chat_completions SET body = $4::json WHERE org = $1 AND id = $2 AND ${LIVE}`,
      [org, completion.id, this.cutoff(), JSON.stringify(completion)],
    );
    return rowCount === 1;
  }

  async messages(org: string, id: string): Promise<StoredMessage[] | undefined> {
    const { rows } = await this.db.query<{ messages: StoredMessage[] }>(
      `SELECT messages FROM chat_completions WHERE org = $1 AND id = $2 AND ${LIVE}`,
      [org, id, this.cutoff()],
    );
    return rows[0]?.messages;
  }

  async delete(org: string, id: string): Promise<void> {
    await this.db.query("DELETE FROM chat_completions WHERE org = $1 AND id = $2", [org, id]);
  }
}
