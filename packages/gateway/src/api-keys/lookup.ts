import type { Logger } from "@gw/core";
import type { Redis } from "ioredis";
import { hashSecret, sameHash } from "./secret.ts";
import { API_KEY_EVENTS_CHANNEL, type ApiKeyStore } from "./store.ts";
import type { ApiKeyRecord } from "./types.ts";

/** Finds the stored key a presented secret belongs to. */
export interface ApiKeyLookup {
  findBySecret(secret: string): Promise<ApiKeyRecord | undefined>;
}

// A fixed digest to compare against when no key matched, so both outcomes do the same work.
const NO_MATCH_HASH = "0".repeat(64);
const MAX_CACHED_KEYS = 10_000;

/**
 * Looks keys up by the SHA-256 of the presented secret, with a short
 * in-process cache. Every change to a key is published on Redis; replicas
 * subscribed to it drop their copy at once, so a revocation is seen
 * everywhere well within a second. While the subscription is down the cache
 * is bypassed, since invalidations could be missed.
 */
export class CachedApiKeyLookup implements ApiKeyLookup {
  private readonly byHash = new Map<string, { record: ApiKeyRecord; expiresAt: number }>();
  private subscribed = false;
  /** Bumped by every change event; a lookup that raced a change does not cache what it read. */
  private generation = 0;

  private readonly store: ApiKeyStore;
  private readonly subscriber: Redis;
  private readonly ttlMs: number;
  private readonly logger: Logger;

  constructor(store: ApiKeyStore, subscriber: Redis, ttlMs: number, logger: Logger) {
    this.store = store;
    this.subscriber = subscriber;
    this.ttlMs = ttlMs;
    this.logger = logger;
  }

  /** Subscribes to key changes; resolves once the subscription is live. */
  async start(): Promise<void> {
    if (this.ttlMs <= 0) return;
    this.subscriber.on("message", (_channel: string, id: string) => {
      this.generation++;
      this.forget(id);
    });
    this.subscriber.on("ready", () => {
      // ioredis re-subscribes on reconnect; changes made while we were away are unknown, so start afresh.
      this.byHash.clear();
      this.subscribed = true;
    });
    const down = () => {
      if (this.subscribed) this.logger.warn("API key change feed lost; key cache bypassed until it is back");
      this.subscribed = false;
      this.byHash.clear();
    };
    this.subscriber.on("close", down);
    this.subscriber.on("error", down);
    await this.subscriber.subscribe(API_KEY_EVENTS_CHANNEL);
    this.subscribed = true;
  }

  async findBySecret(secret: string): Promise<ApiKeyRecord | undefined> {
    const hash = hashSecret(secret);
    const now = Date.now();
    const cached = this.subscribed ? this.byHash.get(hash) : undefined;
    let record: ApiKeyRecord | undefined;
    if (cached && cached.expiresAt > now) {
      record = cached.record;
    } else {
      const generation = this.generation;
      record = await this.store.findByHash(hash);
      if (record && this.subscribed && generation === this.generation) this.remember(hash, record, now);
      else this.byHash.delete(hash);
    }
    // The Redis key was derived from the hash, so a hit already matches; the constant-time
    // comparison guards against a corrupted index and keeps hit and miss equally expensive.
    return sameHash(record?.hash ?? NO_MATCH_HASH, hash) && record ? record : undefined;
  }

  private remember(hash: string, record: ApiKeyRecord, now: number): void {
    if (this.byHash.size >= MAX_CACHED_KEYS) {
      const oldest = this.byHash.keys().next().value;
      if (oldest !== undefined) this.byHash.delete(oldest);
    }
    this.byHash.set(hash, { record, expiresAt: now + this.ttlMs });
  }

  private forget(id: string): void {
    for (const [hash, entry] of this.byHash) {
      if (entry.record.id === id) this.byHash.delete(hash);
    }
  }
}
