import { type Clock, retentionCutoff } from "@gw/core/clock";
import { notFound } from "@gw/core/errors";
import { type Postgres, postgresCanHold } from "@gw/core/postgres";
import { stringified } from "@gw/core/turns";
import type { ConversationStore } from "../conversations/store.ts";
import type {
  FileSearchCallItem,
  FunctionCallItem,
  Item,
  McpApprovalRequestItem,
  McpCallItem,
  McpListToolsItem,
  MessageItem,
} from "../items/items.ts";
import { ApprovalStore, type NewApproval } from "./approvals.ts";

/** What the model produced: an assistant message, function calls; and what hosted MCP tools did. */
export type OutputItem =
  | MessageItem
  | FunctionCallItem
  | McpListToolsItem
  | McpCallItem
  | McpApprovalRequestItem
  | FileSearchCallItem;

/** `queued` and `cancelled` only for background responses (`background: true`). */
export type ResponseStatus = "queued" | "in_progress" | "completed" | "incomplete" | "failed" | "cancelled";

export interface ResponseUsage {
  input_tokens: number;
  /** `cache_write_tokens`: what the provider wrote to its cache (chat providers report none: 0). */
  input_tokens_details: { cached_tokens: number; cache_write_tokens: number };
  output_tokens: number;
  output_tokens_details: { reasoning_tokens: number };
  total_tokens: number;
}

/** A function tool as the response echoes it (OpenAI's `FunctionTool`), a hosted MCP tool (`Mcp`), or a `file_search` tool (`FileSearchTool`). */
export type ResponseTool =
  | {
      type: "function";
      name: string;
      description: string | null;
      parameters: Record<string, unknown> | null;
      strict: boolean | null;
    }
  | {
      type: "mcp";
      server_label: string;
      server_url: string;
      allowed_tools: unknown;
      require_approval: unknown;
      server_description?: string;
    }
  | {
      type: "file_search";
      vector_store_ids: string[];
      max_num_results: number;
      filters: unknown;
      ranking_options: { ranker: string; score_threshold: number };
    };

/** The response object (API reference §2.6, see docs/api/README.md), with the fields of OpenAI's Responses API this service fills. */
export interface ResponseObject {
  id: string;
  object: "response";
  created_at: number;
  status: ResponseStatus;
  /** Whether the response runs on the work queue (responses/background). */
  background: boolean;
  completed_at: number | null;
  error: { code: "server_error" | "rate_limit_exceeded"; message: string } | null;
  incomplete_details: { reason: "max_output_tokens" | "content_filter" } | null;
  instructions: string | null;
  max_output_tokens: number | null;
  max_tool_calls: number | null;
  model: string;
  output: OutputItem[];
  parallel_tool_calls: boolean;
  previous_response_id: string | null;
  conversation: { id: string } | null;
  reasoning: {
    effort: "none" | "minimal" | "low" | "medium" | "high" | "xhigh" | null;
    summary: "auto" | "concise" | "detailed" | null;
  };
  prompt_cache_key: string | null;
  safety_identifier: string | null;
  service_tier: string | null;
  top_logprobs: number | null;
  store: boolean;
  temperature: number | null;
  text: { format: Record<string, unknown>; verbosity?: "low" | "medium" | "high" };
  tool_choice:
    | "none"
    | "auto"
    | "required"
    | { type: "function"; name: string }
    | { type: "mcp"; server_label: string; name?: string | null }
    | { type: "file_search" };
  tools: ResponseTool[];
  top_p: number | null;
  truncation: "auto" | "disabled";
  /** Absent until the model answered (OpenAI's document has no `null` for it). */
  usage?: ResponseUsage;
  user?: string;
  metadata: Record<string, string>;
}

export interface ResponseStoreOptions {
  /** Its wall time stamps and expires responses. */
  clock: Clock;
  /** A stored response (with its input items) is gone this long after it was stored; unset: never. */
  retentionMs?: number | undefined;
}

/**
 * Stored responses and their input items in PostgreSQL, per organization (ids
 * are the service's own, `resp_…`), one row each. A response older than
 * `retentionMs` is absent from every read at once; the sweeper deletes it later.
 */
export class ResponseStore {
  private readonly db: Postgres;
  private readonly clock: Clock;
  private readonly retentionMs: number | undefined;
  /** The approval requests of the responses' hosted MCP tools, kept and gone with them. */
  readonly approvals: ApprovalStore;

  constructor(db: Postgres, options: ResponseStoreOptions) {
    this.db = db;
    this.clock = options.clock;
    this.retentionMs = options.retentionMs;
    this.approvals = new ApprovalStore(db, options.clock);
  }

  /** Responses stored before this are expired (`null`: none expire). */
  private cutoff(): Date | null {
    return retentionCutoff(this.clock, this.retentionMs);
  }

  /**
   * Stores the response with the items it was asked with, the approval
   * requests of its hosted MCP tools (made by `approvals.user`) and, when it
   * continued a conversation, appends the turn to it: all in one
   * transaction. Throws `notFound` (and stores nothing) if that conversation is gone.
   */
  async save(
    org: string,
    response: ResponseObject,
    input: Item[],
    turn?: { conversations: ConversationStore; conversation: string; items: Item[] },
    approvals?: { user: string; requests: NewApproval[] },
  ): Promise<void> {
    const now = new Date(this.clock.wall());
    // A large input is serialised in a turn of its own, before a connection is held for it.
    const [body, inputJson] = [await stringified(response), await stringified(input)];
    const itemIds = [...input, ...response.output].map((i) => i.id);
    // The response and its items in one statement (one round trip, one commit); its foreign key is checked
    // at the statement's end. A turn with more to keep takes a transaction.
    if (!turn && !approvals?.requests.length) {
      await this.db.query(
        `WITH kept AS (INSERT INTO responses (org, id, body, input, stored_at) VALUES ($1, $2, $3::json, $4::json, $5))
         INSERT INTO response_items (org, item_id, response_id) SELECT $1, unnest($6::text[]), $2`,
        [org, response.id, body, inputJson, now, itemIds],
      );
      return;
    }
    await this.db.transaction(async (tx) => {
      await tx.query(
        "INSERT INTO responses (org, id, body, input, stored_at) VALUES ($1, $2, $3::json, $4::json, $5)",
        [org, response.id, body, inputJson, now],
      );
      await tx.query(
        "INSERT INTO response_items (org, item_id, response_id) SELECT $1, unnest($2::text[]), $3",
        [org, itemIds, response.id],
      );
      if (approvals) await this.approvals.recordIn(tx, org, response.id, approvals.user, approvals.requests);
      if (turn && !(await turn.conversations.appendIn(tx, org, turn.conversation, turn.items)))
        throw notFound(`No conversation ${turn.conversation}`);
    });
  }

  async get(org: string, id: string): Promise<ResponseObject | undefined> {
    if (!postgresCanHold(id)) return undefined;
    const { rows } = await this.db.query<{ body: ResponseObject }>(
      "SELECT body FROM responses WHERE org = $1 AND id = $2 AND ($3::timestamptz IS NULL OR stored_at > $3)",
      [org, id, this.cutoff()],
    );
    return rows[0]?.body;
  }

  /** The items the response was asked with; `undefined` if the response is gone. */
  async input(org: string, id: string): Promise<Item[] | undefined> {
    const { rows } = await this.db.query<{ input: Item[] }>(
      "SELECT input FROM responses WHERE org = $1 AND id = $2 AND ($3::timestamptz IS NULL OR stored_at > $3)",
      [org, id, this.cutoff()],
    );
    return rows[0]?.input;
  }

  /**
   * The stored response whose input or output holds the item, and the item
   * (for `item_reference`s): found by `response_items`' primary key
   * `(org, item_id)`. The item is picked out of the response here, not by
   * PostgreSQL: its JSON operators turn every string they pass into `text`,
   * which refuses U+0000 and lone surrogates that `json` keeps as sent.
   */
  async findItem(org: string, itemId: string): Promise<{ responseId: string; item: Item } | undefined> {
    if (!postgresCanHold(itemId)) return undefined;
    const { rows } = await this.db.query<{ response_id: string; input: Item[]; body: ResponseObject }>(
      `SELECT r.id AS response_id, r.input, r.body FROM response_items i
         JOIN responses r ON r.org = i.org AND r.id = i.response_id
        WHERE i.org = $1 AND i.item_id = $2
          AND ($3::timestamptz IS NULL OR r.stored_at > $3)`,
      [org, itemId, this.cutoff()],
    );
    const found = rows[0];
    const item = found && [...found.input, ...found.body.output].find((held) => held.id === itemId);
    return found && item && { responseId: found.response_id, item };
  }

  /** Removes the response, its input items and their entries in `response_items`. */
  async delete(org: string, id: string): Promise<void> {
    await this.db.query("DELETE FROM responses WHERE org = $1 AND id = $2", [org, id]);
  }

  /**
   * Stores a background response as it is queued: its body, no input items
   * yet (they are kept with its answer, by `updateBackground`).
   */
  async saveQueued(org: string, response: ResponseObject): Promise<void> {
    await this.db.query(
      "INSERT INTO responses (org, id, body, input, stored_at) VALUES ($1, $2, $3::json, '[]'::json, $4)",
      [org, response.id, JSON.stringify(response), new Date(this.clock.wall())],
    );
  }

  /**
   * Changes a stored background response under a row lock: `change` sees the
   * stored body and returns the new one, or undefined to leave it. With
   * `kept` (the turn of a response the model answered), its input items are
   * stored and its turn appended to its conversation in the same
   * transaction. Resolves with the body before and after; undefined when
   * there is no such response.
   */
  async updateBackground(
    org: string,
    id: string,
    change: (stored: ResponseObject) => ResponseObject | undefined,
    kept?: { input: Item[]; conversation?: { conversations: ConversationStore; id: string; items: Item[] } },
  ): Promise<{ before: ResponseObject; after: ResponseObject | undefined } | undefined> {
    if (!postgresCanHold(id)) return undefined;
    return this.db.transaction(async (tx) => {
      const { rows } = await tx.query<{ body: ResponseObject }>(
        "SELECT body FROM responses WHERE org = $1 AND id = $2 FOR UPDATE",
        [org, id],
      );
      const before = rows[0]?.body;
      if (!before) return undefined;
      const after = change(structuredClone(before));
      if (!after) return { before, after };
      const answered = kept && (after.status === "completed" || after.status === "incomplete");
      await tx.query(
        answered
          ? "UPDATE responses SET body = $3::json, input = $4::json WHERE org = $1 AND id = $2"
          : "UPDATE responses SET body = $3::json WHERE org = $1 AND id = $2",
        answered
          ? [org, id, await stringified(after), await stringified(kept.input)]
          : [org, id, await stringified(after)],
      );
      if (answered) {
        await tx.query(
          "INSERT INTO response_items (org, item_id, response_id) SELECT $1, unnest($2::text[]), $3",
          [org, [...kept.input, ...after.output].map((i) => i.id), id],
        );
        const turn = kept.conversation;
        if (turn && !(await turn.conversations.appendIn(tx, org, turn.id, turn.items)))
          throw notFound(`No conversation ${turn.id}`);
      }
      return { before, after };
    });
  }
}
