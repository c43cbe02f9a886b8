import { createHmac, createSecretKey, type KeyObject } from "node:crypto";
import type { ResourceRef } from "@gw/core/authz";
import { ValidationFailed } from "@gw/core/errors";
import { CACHE_HEADER } from "@gw/core/http";
import type { Logger } from "@gw/core/logger";
import type { Metrics } from "@gw/core/metrics";
import type { Principal } from "@gw/core/principal";
import type { RedisClient } from "@gw/core/redis";
import { echoOf, headerText } from "@gw/core/validation";
import { Counter } from "prom-client";
import type { ChatProvider, ChatRequest, Completion, StreamSeen, ToolCallDelta } from "../llm/provider.ts";

/**
 * The response cache (docs/api/cache.md): exact-match answers of the model,
 * kept in Redis, reused only where the answer could not tell a principal
 * anything it could not have read (DESIGN decision 16). An entry's key is an
 * HMAC, under a secret only the service holds, of the organization, the
 * principal whose rights the answer could reflect, the model and the
 * canonical form of every field of the call that changes the answer; for a
 * call that read stored content, also the last-write token of each resource
 * it read, so a grant, revoke or delete of one of them (which writes a new
 * token, in Redis, for every replica) makes the next call a miss. Nothing a
 * caller sends becomes part of a Redis key as it was sent.
 */

/** What a request may ask: the default (use the key's setting), `off` (bypass it), `refresh` (ask the model again, keep its answer). */
export const CACHE_DIRECTIVES = ["off", "refresh"] as const;
export type CacheDirective = "default" | (typeof CACHE_DIRECTIVES)[number];
/** What the cache did for an answer. */
export const CACHE_RESULTS = ["hit", "miss", "bypass"] as const;
export type CacheResult = (typeof CACHE_RESULTS)[number];

/** `X-Gateway-Cache` of a request (`off` or `refresh`, any case); anything else is 422 at `["header","x-gateway-cache"]`. */
export function parseCacheDirective(values: string[] | undefined): CacheDirective {
  if (values === undefined) return "default";
  const value = values.length === 1 ? values[0]!.trim().toLowerCase() : undefined;
  if (value === "off" || value === "refresh") return value;
  throw new ValidationFailed([
    {
      loc: ["header", CACHE_HEADER],
      msg: "X-Gateway-Cache should be 'off' or 'refresh', sent once",
      type: "enum",
      ...echoOf(values.length === 1 ? headerText(values[0]!) : values.map(headerText)),
    },
  ]);
}

/** What a model call tells the cache about itself: whether it read stored content, and what. */
export interface CallReads {
  /** The stored resources the call's context came from (a previous response, a conversation, referenced items' places, searched vector stores). */
  resources: ResourceRef[];
  /** Whether the call read anything stored (then its answer is never shared beyond its principal). */
  stored: boolean;
}

/** A kept answer: the provider's completion, and for a stream the pieces it came in. */
interface Entry {
  completion: Completion;
  pieces?: (string | ToolCallDelta)[] | undefined;
}

export interface ResponseCacheOptions {
  redis: RedisClient;
  /** The secret the entries' keys are an HMAC under (derived from the service's own). */
  secret: string;
  /** How long an entry lives, in ms. */
  ttlMs: number;
  /** Bytes (of their JSON) an organization's entries take together at most: past it, its oldest entries go first. */
  maxBytes: number;
  /** Largest entry kept, in bytes of its JSON; a larger answer is not kept. */
  maxEntryBytes: number;
  /** The last-write token of each resource ("" for none), for calls that read stored content. */
  versions(org: string, resources: ResourceRef[]): Promise<string[]>;
  /**
   * How long an entry lives at most when a resource it read had no token
   * (ms): less than a token is kept (`SPICEDB_ZEDTOKEN_TTL`), so a token
   * written after the entry, then gone from Redis, never brings it back.
   */
  tokenlessTtlMs: number;
  metrics: Metrics;
  logger: Logger;
}

/** What the cache found for one call: what the answer header says, and the provider the call then uses. */
export interface CacheLookup {
  result: CacheResult;
  /** The provider for the call: answers from the entry on a hit, keeps the answer on a miss. */
  provider(inner: ChatProvider): ChatProvider;
}

const BYPASS: CacheLookup = { result: "bypass", provider: (inner) => inner };

/**
 * Keeps one entry within its organization's budget, in one step: the
 * organization's index (`#index`: entry → when it expires), the entries'
 * sizes (`#sizes`) and their total (`#bytes`) lose what has expired, and
 * what the same entry weighed before; then the entries that expire first
 * are deleted until the new one fits. All four keys carry the
 * organization's hash tag, so they and its entries share a cluster slot.
 * Time is Redis's own, the same for every replica.
 * KEYS: entry, index, sizes, total. ARGV: JSON, TTL ms, budget.
 */
const KEEP_WITHIN_BUDGET = `
local size = string.len(ARGV[1])
local ttl = tonumber(ARGV[2])
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
local budget = tonumber(ARGV[3])
if size > budget then return 0 end
local function drop(name)
  local weight = tonumber(redis.call('HGET', KEYS[3], name) or '0')
  redis.call('HDEL', KEYS[3], name)
  redis.call('ZREM', KEYS[2], name)
  redis.call('DECRBY', KEYS[4], weight)
end
for _, name in ipairs(redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now)) do drop(name) end
if redis.call('HEXISTS', KEYS[3], KEYS[1]) == 1 then drop(KEYS[1]) end
local total = tonumber(redis.call('GET', KEYS[4]) or '0')
while total + size > budget do
  local oldest = redis.call('ZRANGE', KEYS[2], 0, 0)[1]
  if not oldest then break end
  drop(oldest)
  redis.call('DEL', oldest)
  total = tonumber(redis.call('GET', KEYS[4]) or '0')
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ttl)
redis.call('ZADD', KEYS[2], now + ttl, KEYS[1])
redis.call('HSET', KEYS[3], KEYS[1], size)
redis.call('INCRBY', KEYS[4], size)
for i = 2, 4 do redis.call('PEXPIRE', KEYS[i], ttl) end
return 1
`;

type Scripted = RedisClient & {
  keepCached(
    entry: string,
    index: string,
    sizes: string,
    total: string,
    json: string,
    ttlMs: number,
    budget: number,
  ): Promise<number>;
};

/** Request fields that do not change the model's answer (who asks, how the provider bills or caches it, where it routes from). */
const IGNORED_FIELDS = new Set([
  "route",
  "user",
  "promptCacheKey",
  "safetyIdentifier",
  "serviceTier",
  "fieldNames",
]);

export class ResponseCache {
  private readonly options: ResponseCacheOptions;
  /**
   * The entries' names are an HMAC under it. A key object: an HMAC under a string imports its key on every
   * call, which took seven times as long as the HMAC itself (12 µs against 1.7) on each cached call's path.
   */
  private readonly macKey: KeyObject;
  private readonly redis: Scripted;
  private readonly counter: Counter<"result">;
  private readonly writes: Counter<"outcome">;

  constructor(options: ResponseCacheOptions) {
    // A key of its own, derived from the service's secret: no entry's name is a MAC the secret makes elsewhere.
    const secret = createHmac("sha256", options.secret).update("gateway response cache v1").digest("hex");
    this.macKey = createSecretKey(Buffer.from(secret, "utf8"));
    this.options = options;
    const { redis } = options;
    if (!("keepCached" in redis))
      redis.defineCommand("keepCached", { numberOfKeys: 4, lua: KEEP_WITHIN_BUDGET });
    this.redis = redis as Scripted;
    const { metrics } = options;
    this.counter = new Counter({
      name: `${metrics.prefix}_response_cache_total`,
      help: "Model calls of a model route by what the response cache did: hit (answered from it), miss (asked the model, kept its answer) or bypass (the key's cache off, X-Gateway-Cache: off, or a call it never keeps).",
      labelNames: ["result"] as const,
      registers: [metrics.registry],
    });
    this.writes = new Counter({
      name: `${metrics.prefix}_response_cache_writes_total`,
      help: "Answers offered to the response cache by outcome: stored, too_large (over RESPONSE_CACHE_MAX_ENTRY_BYTES, or the whole RESPONSE_CACHE_MAX_BYTES) or failed (Redis refused).",
      labelNames: ["outcome"] as const,
      registers: [metrics.registry],
    });
    for (const result of CACHE_RESULTS) this.counter.inc({ result }, 0);
    for (const outcome of ["stored", "too_large", "failed"]) this.writes.inc({ outcome }, 0);
  }

  /**
   * Looks `request` up for `principal` as the key's setting and `directive`
   * allow; `reads` undefined: a call the cache never keeps. A lookup Redis
   * cannot answer is a bypass: the cache never fails a call.
   */
  async lookup(
    principal: Principal,
    directive: CacheDirective,
    request: ChatRequest,
    reads: CallReads | undefined,
  ): Promise<CacheLookup> {
    if (!principal.cache || directive === "off" || !reads) return this.count(BYPASS);
    let key: string;
    let ttlMs: number;
    let found: string | null = null;
    try {
      ({ key, ttlMs } = await this.keyOf(principal, request, reads));
      if (directive !== "refresh") found = await this.options.redis.get(key);
    } catch (err) {
      this.options.logger.warn(
        { err: (err as Error).message },
        "the response cache could not be read; the call bypasses it",
      );
      return this.count(BYPASS);
    }
    if (found !== null) {
      const entry = JSON.parse(found) as Entry;
      return this.count({ result: "hit", provider: (inner) => replaying(inner, entry) });
    }
    return this.count({
      result: "miss",
      provider: (inner) => keeping(inner, (entry) => this.keep(key, entry, ttlMs)),
    });
  }

  private count(lookup: CacheLookup): CacheLookup {
    this.counter.inc({ result: lookup.result });
    return lookup;
  }

  /**
   * The entry's Redis key: `gw:rcache:{org}:` and the HMAC (the organization's tag keeps its entries on one
   * slot), and how long it may live: less than a token when a resource it read has no last-write token in
   * Redis now (`tokenlessTtlMs`).
   */
  private async keyOf(
    principal: Principal,
    request: ChatRequest,
    reads: CallReads,
  ): Promise<{ key: string; ttlMs: number }> {
    const shared = principal.cache === "key" && !reads.stored;
    const versions =
      reads.resources.length > 0 ? await this.options.versions(principal.org, reads.resources) : [];
    const fields: Record<string, unknown> = {};
    for (const [name, value] of Object.entries(request)) if (!IGNORED_FIELDS.has(name)) fields[name] = value;
    fields.fallbacks = request.route?.fallbacks ?? [];
    const material = canonicalJson({
      v: 1,
      org: principal.org,
      // The principal whose rights the answer could reflect: the key alone only when nothing stored was read.
      principal: shared ? { key: principal.keyId } : { key: principal.keyId, user: principal.user },
      model: request.model,
      request: fields,
      reads: reads.resources.map((r, i) => [r.type, r.id, versions[i] ?? ""]),
    });
    const mac = createHmac("sha256", this.macKey).update(material).digest("base64url");
    const { ttlMs, tokenlessTtlMs } = this.options;
    return {
      key: `gw:rcache:{${principal.org}}:${mac}`,
      ttlMs: versions.includes("") ? Math.min(ttlMs, tokenlessTtlMs) : ttlMs,
    };
  }

  /**
   * Keeps an answer for `ttlMs` within its organization's budget, unless its
   * JSON is larger than `maxEntryBytes`; a failure is logged, never the call's.
   */
  private async keep(key: string, entry: Entry, ttlMs: number): Promise<void> {
    const json = JSON.stringify(entry);
    const bytes = Buffer.byteLength(json);
    if (bytes > Math.min(this.options.maxEntryBytes, this.options.maxBytes)) {
      this.writes.inc({ outcome: "too_large" });
      return;
    }
    // The entry's name is `gw:rcache:{org}:<mac>`: the organization's bookkeeping shares its tag.
    const tagged = key.slice(0, key.lastIndexOf(":"));
    try {
      await this.redis.keepCached(
        key,
        `${tagged}#index`,
        `${tagged}#sizes`,
        `${tagged}#bytes`,
        json,
        ttlMs,
        this.options.maxBytes,
      );
      this.writes.inc({ outcome: "stored" });
    } catch (err) {
      this.writes.inc({ outcome: "failed" });
      this.options.logger.warn(
        { err: (err as Error).message },
        "the response cache could not keep an answer",
      );
    }
  }
}

/** JSON with every object's keys sorted and undefined values left out: one text for one meaning. */
export function canonicalJson(value: unknown): string {
  return JSON.stringify(sorted(value));
}

function sorted(value: unknown): unknown {
  if (Array.isArray(value)) return value.map((v) => (v === undefined ? null : sorted(v)));
  if (value === null || typeof value !== "object") return value;
  const out: Record<string, unknown> = {};
  for (const name of Object.keys(value).sort()) {
    const v = (value as Record<string, unknown>)[name];
    if (v !== undefined) out[name] = sorted(v);
  }
  return out;
}

/** A hit: the entry's answer, as JSON or replayed as the stream it came in (made of the answer when it came as JSON). */
function replaying(inner: ChatProvider, entry: Entry): ChatProvider {
  const completion = (): Completion => ({ ...structuredClone(entry.completion), cacheHit: true });
  return Object.assign(Object.create(inner) as ChatProvider, {
    complete: async () => completion(),
    stream: async function* (_request: ChatRequest, _signal: AbortSignal, seen?: StreamSeen) {
      const answer = completion();
      if (seen) {
        seen.model = answer.model;
        if (answer.servedBy) seen.servedBy = answer.servedBy;
      }
      const pieces = entry.pieces ?? piecesOf(answer);
      for (const piece of pieces) yield typeof piece === "string" ? piece : { ...piece };
      return answer;
    },
  });
}

/** The pieces a stream of `completion` would have come in: its text, then each tool call whole. */
function piecesOf(completion: Completion): (string | ToolCallDelta)[] {
  return [
    ...(completion.text ? [completion.text] : []),
    ...completion.toolCalls.map((call, index) => ({ index, ...call })),
  ];
}

/** A miss: the model's answer, kept once it is whole (a stream's, with its pieces). */
function keeping(inner: ChatProvider, keep: (entry: Entry) => Promise<void>): ChatProvider {
  return Object.assign(Object.create(inner) as ChatProvider, {
    complete: async (request: ChatRequest, signal: AbortSignal) => {
      const completion = await inner.complete(request, signal);
      if (keepable(completion)) await keep({ completion });
      return completion;
    },
    stream: async function* (request: ChatRequest, signal: AbortSignal, seen?: StreamSeen) {
      const pieces: (string | ToolCallDelta)[] = [];
      const stream = inner.stream(request, signal, seen);
      let step = await stream.next();
      try {
        while (!step.done) {
          pieces.push(typeof step.value === "string" ? step.value : { ...step.value });
          yield step.value;
          step = await stream.next();
        }
      } finally {
        // Its reader stopped early (a guardrail cut it, the client went away): the provider's stream is closed too.
        if (!step.done) await stream.return(undefined as never).catch(() => undefined);
      }
      const completion = step.value;
      if (keepable(completion) && !signal.aborted) await keep({ completion, pieces });
      return completion;
    },
  });
}

/** Only whole answers are kept: not one cut by the output cap's overrun or a content filter. */
const keepable = (completion: Completion) =>
  completion.finishReason !== "content_filter" && !completion.overrun && !completion.cacheHit;
