import { entryBound } from "@gw/core/bounded-cache";
import { type Clock, systemClock } from "@gw/core/clock";
import { AppError } from "@gw/core/errors";
import type { Logger } from "@gw/core/logger";
import { createRedis, followChannel, type RedisClient, type RedisCommandObserver } from "@gw/core/redis";
import { LRUCache } from "lru-cache";
import { hashSecret, sameHash } from "./secret.ts";
import { API_KEY_EVENTS_CHANNEL, type ApiKeyStore } from "./store.ts";
import type { ApiKeyRecord } from "./types.ts";

/** Finds the stored key a presented secret belongs to. */
export interface ApiKeyLookup {
  findBySecret(secret: string): Promise<ApiKeyRecord | undefined>;
  /** For tokens, which name the key that minted them. */
  findById(id: string): Promise<ApiKeyRecord | undefined>;
}

/** The key store could not be asked, and no recent copy of the key was at hand. */
export class ApiKeyStoreUnavailable extends AppError {
  constructor(cause: unknown) {
    super("service_unavailable", "Authentication is unavailable; try again", {
      cause,
      reason: "api_key_store_unavailable",
    });
    this.name = "ApiKeyStoreUnavailable";
  }
}

/**
 * The connection `CachedApiKeyLookup` hears key changes on. It only
 * receives, so no command timeout (it would cut it) and no cap on retries.
 * ioredis's own resubscription after a reconnect is off: that SUBSCRIBE is a
 * command nobody awaits, so when the connection closes before Redis answers
 * it (a shutdown right after Redis came back) its rejection would be
 * unhandled. The lookup subscribes again itself on every "ready", catching
 * and logging a failure, and needs that answer anyway to trust its cache.
 */
export function createKeyEventsSubscriber(
  url: string,
  options: { logger: Logger; metrics?: RedisCommandObserver },
): RedisClient {
  const subscriber = createRedis(url, {
    connectionName: "gateway-key-events",
    ...(options.metrics ? { metrics: options.metrics } : {}),
    extra: { commandTimeout: undefined, maxRetriesPerRequest: null, autoResubscribe: false },
  });
  subscriber.on("error", (err) => options.logger.warn({ err: err.message }, "redis subscriber error"));
  return subscriber;
}

// A fixed digest to compare against when no key matched, so both outcomes do the same work.
const NO_MATCH_HASH = "0".repeat(64);
const MAX_CACHED_KEYS = 10_000;

interface Entry {
  record: ApiKeyRecord;
  /** Served without asking Redis until then. */
  freshUntil: number;
  /** Served when Redis cannot be asked, until then. */
  staleUntil: number;
}

/**
 * Looks keys up by the SHA-256 of the presented secret, with a short
 * in-process cache (least recently used keys go first). Concurrent misses of
 * one key share one Redis read. Every change to a key is published on Redis; replicas
 * subscribed to it drop their copy at once, so a revocation is seen
 * everywhere well within a second. While the subscription is down, cached
 * copies are not trusted as fresh. When Redis cannot be reached at all, a
 * copy fetched within `staleIfErrorMs` keeps its key working, so an outage
 * does not stop authenticated traffic (a replica cut off from Redis may
 * honour a key revoked elsewhere for that long); anything else is a 503.
 */
export class CachedApiKeyLookup implements ApiKeyLookup {
  /*
   * Bounded by lru-cache, without its TTL or fetchMethod: a change event must
   * keep a read already under way from being cached while its callers still
   * get what it read (lru-cache aborts an in-flight fetch on delete), and a
   * copy is fresh for `ttlMs` but usable on an outage for `staleIfErrorMs`.
   */
  private readonly byHash = new LRUCache<string, Entry>(entryBound(MAX_CACHED_KEYS));
  private readonly byId = new LRUCache<string, Entry>(entryBound(MAX_CACHED_KEYS));
  /** Reads in flight, by cache and key, with the generation they started in. */
  private readonly inFlight = new Map<
    string,
    { generation: number; read: Promise<ApiKeyRecord | undefined> }
  >();
  private subscribed = false;
  /** Bumped by every change event; a lookup that raced a change does not cache what it read. */
  private generation = 0;
  private readonly store: ApiKeyStore;
  private readonly subscriber: RedisClient;
  private readonly ttlMs: number;
  private readonly staleIfErrorMs: number;
  private readonly logger: Logger;
  private readonly clock: Clock;

  constructor(opts: {
    store: ApiKeyStore;
    subscriber: RedisClient;
    ttlMs: number;
    staleIfErrorMs: number;
    logger: Logger;
    clock?: Clock;
  }) {
    this.clock = opts.clock ?? systemClock;
    this.store = opts.store;
    this.subscriber = opts.subscriber;
    this.ttlMs = opts.ttlMs;
    this.staleIfErrorMs = opts.staleIfErrorMs;
    this.logger = opts.logger;
  }

  /**
   * Subscribes to key changes; resolves once the subscription is live. If Redis is slow to come, it
   * resolves after `readyTimeoutMs` without the feed: the cache stays untrusted until it is live. A
   * SUBSCRIBE refused on a connection that was ready at the start rejects.
   */
  async start(readyTimeoutMs = 10_000): Promise<void> {
    const changed = (id: string) => {
      this.generation++;
      this.forget(id);
    };
    this.store.onChange(changed);
    // The connection may carry other feeds (MCP servers' changes): only this channel names keys.
    const feed = followChannel(this.subscriber, API_KEY_EVENTS_CHANNEL, {
      onMessage: (id) => {
        this.logger.debug({ keyId: id }, "API key changed elsewhere; cached copy dropped");
        changed(id);
      },
      // Trust the feed only once a SUBSCRIBE has been answered on the current connection: after a
      // reconnect (or a cluster's move of its subscriber to another node), changes made meanwhile are
      // unknown, so cached copies start over.
      onLive: () => {
        this.distrustAll();
        this.subscribed = true;
      },
      onLost: () => {
        if (this.subscribed)
          this.logger.warn("API key change feed lost; cached keys are not trusted until it is back");
        this.subscribed = false;
        this.distrustAll();
      },
      onRefused: (err) => this.logger.warn({ err: err.message }, "API key change feed: subscribe failed"),
    });
    await feed.firstLive(readyTimeoutMs);
  }

  async findBySecret(secret: string): Promise<ApiKeyRecord | undefined> {
    const hash = hashSecret(secret);
    const record = await this.cached(this.byHash, `h:${hash}`, hash, () => this.store.findByHash(hash));
    // The Redis key was derived from the hash, so a hit already matches; the constant-time
    // comparison guards against a corrupted index and keeps hit and miss equally expensive.
    return sameHash(record?.hash ?? NO_MATCH_HASH, hash) && record ? record : undefined;
  }

  findById(id: string): Promise<ApiKeyRecord | undefined> {
    return this.cached(this.byId, `i:${id}`, id, () => this.store.get(id));
  }

  private async cached(
    cache: LRUCache<string, Entry>,
    flightKey: string,
    key: string,
    fetch: () => Promise<ApiKeyRecord | undefined>,
  ): Promise<ApiKeyRecord | undefined> {
    const now = this.clock.now();
    const entry = cache.get(key);
    if (entry && this.subscribed && entry.freshUntil > now) return entry.record;
    const generation = this.generation;
    // Join a read already under way, unless a change event came since it started: what it
    // read may predate a revocation this request must see.
    let flight = this.inFlight.get(flightKey);
    if (!flight || flight.generation !== generation) {
      const read = fetch();
      const started = { generation, read };
      flight = started;
      this.inFlight.set(flightKey, started);
      const done = () => {
        if (this.inFlight.get(flightKey) === started) this.inFlight.delete(flightKey);
      };
      read.then(done, done);
    }
    let record: ApiKeyRecord | undefined;
    try {
      record = await flight.read;
    } catch (err) {
      if (entry && entry.staleUntil > now) {
        this.logger.warn(
          { keyId: entry.record.id },
          "API key store unavailable; using the last copy of the key",
        );
        return entry.record;
      }
      throw new ApiKeyStoreUnavailable(err);
    }
    if (record && generation === this.generation) this.remember(cache, key, record, now);
    else if (!record) cache.delete(key);
    return record;
  }

  private remember(cache: LRUCache<string, Entry>, key: string, record: ApiKeyRecord, now: number): void {
    cache.set(key, {
      record,
      freshUntil: this.subscribed ? now + this.ttlMs : 0,
      staleUntil: now + this.staleIfErrorMs,
    });
  }

  private distrustAll(): void {
    for (const map of [this.byHash, this.byId]) for (const entry of map.values()) entry.freshUntil = 0;
  }

  private forget(id: string): void {
    this.byId.delete(id);
    const hashes = [...this.byHash.entries()].filter(([, entry]) => entry.record.id === id);
    for (const [hash] of hashes) this.byHash.delete(hash);
  }
}
