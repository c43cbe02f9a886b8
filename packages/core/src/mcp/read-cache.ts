import { LRUCache } from "lru-cache";
import { entryBound } from "../bounded-cache.ts";
import { type Clock, systemClock } from "../clock.ts";
import type { Logger } from "../logger.ts";
import { followChannel, type RedisClient } from "../redis.ts";

/** The Redis channel on which replicas tell each other that an MCP server or its credentials changed. */
export const MCP_CHANGES_CHANNEL = "gw:mcp:changes";

/** How long a kept copy is served without reading PostgreSQL again, while the change feed is live. */
const MAX_AGE_MS = 10_000;
const MAX_ENTRIES = 10_000;

interface Entry {
  value: unknown;
  freshUntil: number;
}

/**
 * Copies of what every proxied MCP call reads from PostgreSQL (a server's
 * row, a credential still sealed), kept in this process so that a call
 * costs no round trip to it. A change made through this process drops the
 * server's copies at once, before it is answered; other replicas hear of it
 * on `MCP_CHANGES_CHANNEL` and drop theirs, as the API keys' cache does.
 * While the feed is down, or until it is first heard, nothing is kept; a
 * read that raced a change is not kept. Nothing here decides access: the
 * checks in SpiceDB are asked on every call as before.
 */
export class McpReadCache {
  private readonly entries = new LRUCache<string, Entry>(entryBound(MAX_ENTRIES));
  /** The change feed; nothing is kept while it is not live. */
  private feed: { isLive(): boolean } | undefined;
  /** Bumped by every change and every (re)subscription. */
  private generation = 0;
  private readonly publisher: Pick<RedisClient, "publish">;
  private readonly subscriber: RedisClient | undefined;
  private readonly logger: Logger | undefined;
  private readonly clock: Clock;

  constructor(options: {
    /** Where changes are told to other replicas. */
    publisher: Pick<RedisClient, "publish">;
    /** A connection in subscriber mode (it may listen to other channels too); none: nothing is kept. */
    subscriber?: RedisClient;
    logger?: Logger;
    clock?: Clock;
  }) {
    this.publisher = options.publisher;
    this.subscriber = options.subscriber;
    this.logger = options.logger;
    this.clock = options.clock ?? systemClock;
  }

  /**
   * Listens for other replicas' changes; resolves once the subscription is
   * live, or after `readyTimeoutMs` if Redis is slow to come (nothing is kept
   * until it is live).
   */
  async start(readyTimeoutMs = 10_000): Promise<void> {
    const subscriber = this.subscriber;
    if (!subscriber) return;
    const feed = followChannel(subscriber, MCP_CHANGES_CHANNEL, {
      onMessage: (message) => {
        const [org, serverId] = message.split("\u0000");
        if (org !== undefined && serverId !== undefined) this.forget(org, serverId);
      },
      onLive: () => {
        // Changes made while it was away are unknown: start over.
        this.generation++;
        this.entries.clear();
      },
      onLost: () => {
        this.generation++;
        this.entries.clear();
      },
      onRefused: (err) => this.logger?.warn({ err: err.message }, "MCP change feed: subscribe failed"),
    });
    this.feed = feed;
    // Refused, it starts without the feed (logged above): its copies are then never kept.
    await feed.firstLive(readyTimeoutMs).catch(() => {});
  }

  /** `read()`'s answer, or a copy of it kept for the server `serverId` under `key`. */
  async read<T>(org: string, serverId: string, key: string, read: () => Promise<T>): Promise<T> {
    const name = `${org}\u0000${serverId}\u0000${key}`;
    const now = this.clock.now();
    const entry = this.entries.get(name);
    if (entry && this.feed?.isLive() && entry.freshUntil > now) return entry.value as T;
    const generation = this.generation;
    const value = await read();
    if (this.feed?.isLive() && generation === this.generation)
      this.entries.set(name, { value, freshUntil: this.clock.now() + MAX_AGE_MS });
    return value;
  }

  /**
   * A server or its credentials changed (through this process): its copies
   * here are dropped at once, and other replicas are told. A failure to tell
   * them is logged; their copies end within `MAX_AGE_MS`.
   */
  async changed(org: string, serverId: string): Promise<void> {
    this.forget(org, serverId);
    await this.publisher
      .publish(MCP_CHANGES_CHANNEL, `${org}\u0000${serverId}`)
      .catch((err: Error) =>
        this.logger?.warn(
          { err: err.message, server: serverId },
          "MCP change feed: other replicas were not told of a change (their copies end within 10 s)",
        ),
      );
  }

  private forget(org: string, serverId: string): void {
    this.generation++;
    const prefix = `${org}\u0000${serverId}\u0000`;
    for (const name of [...this.entries.keys()]) if (name.startsWith(prefix)) this.entries.delete(name);
  }
}
