import { type Clock, retentionCutoff } from "@gw/core/clock";
import { type Postgres, postgresCanHold, type Queryable } from "@gw/core/postgres";
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

export interface ConversationStoreOptions {
  /** Its wall time stamps conversations' activity and expires idle ones. */
  clock: Clock;
  /** A conversation untouched (not created, updated or given items) for this long is gone; unset: never. */
  idleExpiryMs?: number | undefined;
}

/**
 * A page of items: the conversation (if visible), the position of `after`
 * (if given), then up to $4 items past it in the order asked, read along the
 * primary key `(org, conversation_id, position)` in that direction. No rows:
 * no conversation; `anchor` null with an `after`: not one of its items.
 */
const pageSql = (direction: "ASC" | "DESC", past: "<" | ">") => `
  WITH conversation AS (
    SELECT 1 FROM conversations
     WHERE org = $1 AND id = $2 AND ($5::timestamptz IS NULL OR active_at > $5)
  ), anchor AS (
    SELECT (SELECT position FROM conversation_items
             WHERE org = $1 AND conversation_id = $2 AND id = $3) AS position
  )
  SELECT anchor.position AS anchor, page.item
    FROM conversation CROSS JOIN anchor
    LEFT JOIN LATERAL (
      SELECT item, position FROM conversation_items
       WHERE org = $1 AND conversation_id = $2
         AND ($3::text IS NULL OR position ${past} anchor.position)
       ORDER BY position ${direction}
       LIMIT $4
    ) page ON true
   ORDER BY page.position ${direction}`;
const PAGE = { asc: pageSql("ASC", ">"), desc: pageSql("DESC", "<") };

/**
 * Conversations and their items in PostgreSQL, per organization (ids are the
 * service's own, `conv_…`). Items are read a page at a time, never all at
 * once; every change is one transaction. A conversation idle past
 * `idleExpiryMs` is absent from every read at once; the sweeper deletes it later.
 */
export class ConversationStore {
  private readonly db: Postgres;
  private readonly clock: Clock;
  private readonly idleExpiryMs: number | undefined;

  constructor(db: Postgres, options: ConversationStoreOptions) {
    this.db = db;
    this.clock = options.clock;
    this.idleExpiryMs = options.idleExpiryMs;
  }

  /** Conversations last active before this are expired (`null`: none expire). */
  private idleCutoff(): Date | null {
    return retentionCutoff(this.clock, this.idleExpiryMs);
  }

  /** Stores a new conversation and its first items together. */
  async create(org: string, conversation: Conversation, items: Item[] = []): Promise<void> {
    await this.db.transaction(async (tx) => {
      await tx.query("INSERT INTO conversations (org, id, body, active_at) VALUES ($1, $2, $3::json, $4)", [
        org,
        conversation.id,
        JSON.stringify(conversation),
        new Date(this.clock.wall()),
      ]);
      if (items.length > 0) await this.appendIn(tx, org, conversation.id, items);
    });
  }

  async get(org: string, id: string): Promise<Conversation | undefined> {
    if (!postgresCanHold(id)) return undefined;
    const { rows } = await this.db.query<{ body: Conversation }>(
      `SELECT body FROM conversations
        WHERE org = $1 AND id = $2 AND ($3::timestamptz IS NULL OR active_at > $3)`,
      [org, id, this.idleCutoff()],
    );
    return rows[0]?.body;
  }

  /** Replaces the stored conversation object; false if it is gone. */
  async update(org: string, conversation: Conversation): Promise<boolean> {
    const { rowCount } = await this.db.query(
      `UPDATE conversations SET body = $3::json, active_at = $4
        WHERE org = $1 AND id = $2 AND ($5::timestamptz IS NULL OR active_at > $5)`,
      [org, conversation.id, JSON.stringify(conversation), new Date(this.clock.wall()), this.idleCutoff()],
    );
    return rowCount === 1;
  }

  /**
   * Up to `limit` items after the item `after` (or from the start) in `order`
   * (`asc`: oldest first); `undefined` if `after` is not an item of this
   * conversation, `null` if the conversation is gone.
   */
  async page(
    org: string,
    id: string,
    options: { limit: number; order: "asc" | "desc"; after?: string | undefined },
  ): Promise<ItemPage | undefined | null> {
    if (!postgresCanHold(id)) return null;
    // An `after` PostgreSQL cannot hold is no item: asked as the empty id, which none has.
    const after = options.after !== undefined && !postgresCanHold(options.after) ? "" : options.after;
    const { rows } = await this.db.query<{ anchor: string | null; item: Item | null }>(PAGE[options.order], [
      org,
      id,
      after ?? null,
      options.limit + 1,
      this.idleCutoff(),
    ]);
    if (rows.length === 0) return null;
    if (options.after !== undefined && rows[0]!.anchor === null) return undefined;
    const items = rows.flatMap((r) => (r.item ? [r.item] : []));
    return { items: items.slice(0, options.limit), hasMore: items.length > options.limit };
  }

  /** The items newest first, `pageSize` at a time, each page read as the caller goes on. */
  async *newestFirst(org: string, id: string, pageSize: number): AsyncGenerator<ItemPage> {
    let after: string | undefined;
    while (true) {
      const page = await this.page(org, id, { limit: pageSize, order: "desc", after });
      if (!page) return; // gone, or the item we stood on was removed meanwhile
      yield page;
      if (!page.hasMore) return;
      after = page.items.at(-1)!.id;
    }
  }

  /** Appends items in order; false if the conversation is gone. */
  async append(org: string, id: string, items: Item[]): Promise<boolean> {
    if (items.length === 0) return (await this.get(org, id)) !== undefined;
    return this.db.transaction((tx) => this.appendIn(tx, org, id, items));
  }

  /**
   * Appends items inside the caller's transaction: the conversation's row is
   * locked while its counter hands out their positions, so concurrent appends
   * never interleave or collide. False (and nothing written) if it is gone.
   */
  async appendIn(tx: Queryable, org: string, id: string, items: Item[]): Promise<boolean> {
    const { rows } = await tx.query<{ last: string }>(
      `UPDATE conversations SET last_position = last_position + $3, active_at = $4
        WHERE org = $1 AND id = $2 AND ($5::timestamptz IS NULL OR active_at > $5)
        RETURNING last_position AS last`,
      [org, id, items.length, new Date(this.clock.wall()), this.idleCutoff()],
    );
    if (rows.length === 0) return false;
    const first = Number(rows[0]!.last) - items.length + 1;
    await tx.query(
      `INSERT INTO conversation_items (org, conversation_id, position, id, item)
       SELECT $1, $2, t.position, t.id, t.item::json
         FROM unnest($3::bigint[], $4::text[], $5::text[]) AS t(position, id, item)`,
      [org, id, items.map((_, i) => first + i), items.map((i) => i.id), items.map((i) => JSON.stringify(i))],
    );
    return true;
  }

  async item(org: string, id: string, itemId: string): Promise<Item | undefined> {
    if (!postgresCanHold(id) || !postgresCanHold(itemId)) return undefined;
    const { rows } = await this.db.query<{ item: Item }>(
      `SELECT i.item FROM conversation_items i
         JOIN conversations c ON c.org = i.org AND c.id = i.conversation_id
        WHERE i.org = $1 AND i.conversation_id = $2 AND i.id = $3
          AND ($4::timestamptz IS NULL OR c.active_at > $4)`,
      [org, id, itemId, this.idleCutoff()],
    );
    return rows[0]?.item;
  }

  /** Whether the item was there. */
  async deleteItem(org: string, id: string, itemId: string): Promise<boolean> {
    if (!postgresCanHold(id) || !postgresCanHold(itemId)) return false;
    const { rowCount } = await this.db.query(
      `DELETE FROM conversation_items i USING conversations c
        WHERE c.org = i.org AND c.id = i.conversation_id
          AND i.org = $1 AND i.conversation_id = $2 AND i.id = $3
          AND ($4::timestamptz IS NULL OR c.active_at > $4)`,
      [org, id, itemId, this.idleCutoff()],
    );
    return rowCount === 1;
  }

  /**
   * The conversation holding the item, and the item (for `item_reference`s):
   * item ids are unique within an organization, found by the index on
   * `(org, id)`.
   */
  async findItem(org: string, itemId: string): Promise<{ conversationId: string; item: Item } | undefined> {
    if (!postgresCanHold(itemId)) return undefined;
    const { rows } = await this.db.query<{ conversation_id: string; item: Item }>(
      `SELECT i.conversation_id, i.item FROM conversation_items i
         JOIN conversations c ON c.org = i.org AND c.id = i.conversation_id
        WHERE i.org = $1 AND i.id = $2
          AND ($3::timestamptz IS NULL OR c.active_at > $3)`,
      [org, itemId, this.idleCutoff()],
    );
    const found = rows[0];
    return found && { conversationId: found.conversation_id, item: found.item };
  }

  /** Removes the conversation and its items. */
  async delete(org: string, id: string): Promise<void> {
    await this.db.query("DELETE FROM conversations WHERE org = $1 AND id = $2", [org, id]);
  }
}
