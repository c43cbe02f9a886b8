import type { Logger } from "@gw/core";
import type { Redis } from "ioredis";
import { hashSecret, sameHash } from "./secret.ts";
import { API_KEY_EVENTS_CHANNEL, type ApiKeyStore } from "./store.ts";
import type { ApiKeyRecord } from "./types.ts";

/** Finds the stored key a presented secret belongs to. */
export interface ApiKeyLookup {
  findBySecret(secret: string): Promise<ApiKeyRecord | undefined>;
}

/** The key store could not be asked, and no recent copy of the key was at hand. */
export class ApiKeyStoreUnavailable extends Error {
  constructor(cause: unknown) {
    super("The API key store is unavailable", { cause });
    this.name = "ApiKeyStoreUnavailable";
  }
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
 * in-process cache. Every change to a key is published on Redis; replicas
 * subscribed to it drop their copy at once, so a revocation is seen
 * everywhere well within a second. While the subscription is down, cached
 * copies are not trusted as fresh. When Redis cannot be reached at all, a
 * copy fetched within `staleIfErrorMs` keeps its key working (nobody can
 * revoke a key while Redis is down either), so an outage does not stop
 * authenticated traffic; anything else is a 503.
 */
export class CachedApiKeyLookup implements ApiKeyLookup {
  private readonly byHash = new Map<string, Entry>();
  private subscribed = false;
  /** Bumped by every change event; a lookup that raced a change does not cache what it read. */
  private generation = 0;
  private readonly store: ApiKeyStore;
  private readonly subscriber: Redis;
  private readonly ttlMs: number;
  private readonly staleIfErrorMs: number;
  private readonly logger: Logger;

  constructor(opts: {
    store: ApiKeyStore;
    subscriber: Redis;
    ttlMs: number;
    staleIfErrorMs: number;
    logger: Logger;
  }) {
    this.store = opts.store;
    this.subscriber = opts.subscriber;
    this.ttlMs = opts.ttlMs;
    this.staleIfErrorMs = opts.staleIfErrorMs;
    this.logger = opts.logger;
  }

  /** Subscribes to key changes; resolves once the subscription is live. */
  async start(): Promise<void> {
    const changed = (id: string) => {
      this.generation++;
      this.forget(id);
    };
    this.store.onChange(changed);
    this.subscriber.on("message", (_channel: string, id: string) => changed(id));
    this.subscriber.on("ready", () => {
      // ioredis re-subscribes on reconnect; changes made while we were away are unknown.
      this.distrustAll();
      this.subscribed = true;
    });
    const down = () => {
      if (this.subscribed)
        this.logger.warn("API key change feed lost; cached keys are not trusted until it is back");
      this.subscribed = false;
      this.distrustAll();
    };
    this.subscriber.on("close", down);
    this.subscriber.on("error", down);
    await this.subscriber.subscribe(API_KEY_EVENTS_CHANNEL);
    this.subscribed = true;
  }

  async findBySecret(secret: string): Promise<ApiKeyRecord | undefined> {
    const hash = hashSecret(secret);
    const now = Date.now();
    const cached = this.byHash.get(hash);
    let record: ApiKeyRecord | undefined;
    if (cached && this.subscribed && cached.freshUntil > now) {
      record = cached.record;
    } else {
      const generation = this.generation;
      try {
        record = await this.store.findByHash(hash);
      } catch (err) {
        if (cached && cached.staleUntil > now) {
          this.logger.warn(
            { keyId: cached.record.id },
            "API key store unavailable; using the last copy of the key",
          );
          record = cached.record;
        } else {
          throw new ApiKeyStoreUnavailable(err);
        }
      }
      if (record && generation === this.generation && record !== cached?.record)
        this.remember(hash, record, now);
      else if (!record) this.byHash.delete(hash);
    }
    // The Redis key was derived from the hash, so a hit already matches; the constant-time
    // comparison guards against a corrupted index and keeps hit and miss equally expensive.
    return sameHash(record?.hash ?? NO_MATCH_HASH, hash) && record ? record : undefined;
  }

  private remember(hash: string, record: ApiKeyRecord, now: number): void {
    this.byHash.delete(hash);
    if (this.byHash.size >= MAX_CACHED_KEYS) {
      const oldest = this.byHash.keys().next().value;
      if (oldest !== undefined) this.byHash.delete(oldest);
    }
    this.byHash.set(hash, {
      record,
      freshUntil: this.subscribed ? now + this.ttlMs : 0,
      staleUntil: now + this.staleIfErrorMs,
    });
  }

  private distrustAll(): void {
    for (const entry of this.byHash.values()) entry.freshUntil = 0;
  }

  private forget(id: string): void {
    for (const [hash, entry] of this.byHash) {
      if (entry.record.id === id) this.byHash.delete(hash);
    }
  }
}
