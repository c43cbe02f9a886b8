import { LRUCache } from "lru-cache";
import { z } from "zod";
import { entryBound } from "./bounded-cache.ts";
import { type Clock, systemClock } from "./clock.ts";
import { AppError, forbidden } from "./errors.ts";
import { documentedAs, jsonSchemaOf } from "./openapi.ts";
import { principalUserIdSchema, userIdSchema } from "./principal.ts";
import type { RedisClient } from "./redis.ts";

/**
 * Which end users a key, and every token exchanged from it, may act for:
 * `any` (the default, and what keys made before the policy existed have),
 * `none` (its owner only), or an object naming `prefixes` (users whose id
 * starts with one of them), `users` (those very users), or both. Acting as
 * the key's own owner is always allowed; acting as a user who owns a key of
 * the organization is allowed only through `users` (`decideActingFor`).
 */
export type OnBehalfOfPolicy =
  | "any"
  | "none"
  | { prefixes: string[]; users?: string[] }
  | { prefixes?: string[]; users: string[] };

const MAX_PREFIXES = 32;
const MAX_USERS = 100;

const distinctList = (max: number, item: z.ZodType<string> = userIdSchema) =>
  z
    .array(item)
    .min(1)
    .max(max)
    .refine((list) => new Set(list).size === list.length, "List should not contain duplicates");

const listsObject = z
  .strictObject({
    prefixes: distinctList(MAX_PREFIXES).optional(),
    users: distinctList(MAX_USERS, principalUserIdSchema).optional(),
  })
  .refine(
    (policy) => policy.prefixes !== undefined || policy.users !== undefined,
    "Value error, give prefixes, users or both",
  );
const modes = z.enum(["any", "none"]);

/** `"any"`, `"none"` or `{"prefixes": [...], "users": [...]}`, judged by its shape so a problem is reported inside the form it resembles. */
export const onBehalfOfSchema = documentedAs(
  z.unknown().transform((value, ctx): OnBehalfOfPolicy => {
    const isObject = typeof value === "object" && value !== null && !Array.isArray(value);
    const result = (isObject ? listsObject : modes).safeParse(value, { reportInput: true });
    if (result.success) return result.data as OnBehalfOfPolicy;
    for (const issue of result.error.issues) ctx.addIssue(issue as Parameters<typeof ctx.addIssue>[0]);
    return z.NEVER;
  }),
  () => ({
    anyOf: [
      jsonSchemaOf(modes),
      {
        ...jsonSchemaOf(listsObject),
        description:
          "prefixes: end users whose id starts with one of them, never a user who owns a key of the organization; users: these end users, key owners included. At least one of the two.",
        minProperties: 1,
      },
    ],
  }),
);

/** The policy in words, for the 403 that refuses a user outside it. */
export function describeOnBehalfOf(policy: OnBehalfOfPolicy | undefined): string {
  if (policy === undefined || policy === "any") return "any end user who owns no API key of the organization";
  if (policy === "none") return "no end user but its owner";
  const parts: string[] = [];
  if (policy.prefixes)
    parts.push(`end users whose id starts with ${policy.prefixes.map((p) => `'${p}'`).join(", ")}`);
  if (policy.users) parts.push(`the end users ${policy.users.map((u) => `'${u}'`).join(", ")}`);
  return `only ${parts.join(", and ")}`;
}

/** Where the gateway keeps API keys in Redis (its `ApiKeyStore`); the service reads them too. */
export const apiKeyRecordKey = (id: string) => `gw:apikey:${id}`;
/** The ids of an organization's API keys. */
export const orgApiKeysKey = (org: string) => `gw:org:${org}:apikeys`;
/**
 * The users who own, or have owned, an API key of the organization; with the
 * member `""` (never a user id) once it holds the owner of every key made
 * before this set was kept.
 */
export const orgKeyOwnersKey = (org: string) => `gw:org:${org}:key-owners`;
const COMPLETE = "";

/** Who owns API keys of an organization, as the rule of `decideActingFor` needs it. */
export interface KeyOwners {
  /**
   * Whether `user` owns or has owned an API key of `org` (revoked and expired
   * keys count: once protected, always protected). Throws when it cannot be
   * known, so the caller fails closed.
   */
  isKeyOwner(org: string, user: string): Promise<boolean>;
}

/** Who owns the organization's keys could not be read: nobody may act for anybody meanwhile. */
export class KeyOwnersUnavailable extends AppError {
  constructor(cause: unknown) {
    super("service_unavailable", "Authentication is unavailable; try again", {
      cause,
      reason: "api_key_store_unavailable",
    });
    this.name = "KeyOwnersUnavailable";
  }
}

const MAX_KNOWN_OWNERS = 10_000;
/** Organizations whose whole owner set a replica keeps for an outage, and the largest set it keeps. */
const MAX_SNAPSHOTS = 1_000;
const MAX_SNAPSHOT_OWNERS = 10_000;

export interface KeyOwnersOptions {
  /**
   * While Redis cannot be asked, an organization's owners as read within
   * this many milliseconds still decide (as a cached API key still
   * authenticates: `API_KEY_STALE_IF_ERROR_MS`); 0 (the default): never, a 503.
   */
  staleIfErrorMs?: number;
  clock?: Clock;
}

/**
 * The organization's key owners in Redis (`orgKeyOwnersKey`), asked on every
 * request that acts for a user other than its key's owner, so every replica
 * sees a new key's owner as soon as its creation is acknowledged: the
 * gateway's key store adds the owner before it writes the key. An
 * organization whose set lacks its completeness mark (keys made before the
 * set was kept) is filled once from its key records, by whichever process
 * asks first. The set never shrinks, so a replica remembers who it found to
 * be an owner; it never remembers who was not, except as the whole set it
 * read last (`staleIfErrorMs`): while Redis cannot be asked, that reading
 * decides until it is that old, so an outage does not stop traffic acting
 * for end users (a replica cut off from Redis may miss an owner whose key
 * was made elsewhere since), and afterwards it is a 503.
 */
export class RedisKeyOwners implements KeyOwners {
  private readonly redis: RedisClient;
  private readonly known = new LRUCache<string, true>(entryBound(MAX_KNOWN_OWNERS));
  private readonly filling = new Map<string, Promise<void>>();
  /** Each organization's whole set as last read, and when that read began. */
  private readonly snapshots = new LRUCache<string, { owners: ReadonlySet<string>; at: number }>(
    entryBound(MAX_SNAPSHOTS),
  );
  private readonly staleIfErrorMs: number;
  private readonly clock: Clock;

  constructor(redis: RedisClient, options: KeyOwnersOptions = {}) {
    this.redis = redis;
    this.staleIfErrorMs = options.staleIfErrorMs ?? 0;
    this.clock = options.clock ?? systemClock;
  }

  /** Notes that `owner` owns a key of `org`; the key store calls it before it writes the key. */
  async add(org: string, owner: string): Promise<void> {
    await this.redis.sadd(orgKeyOwnersKey(org), owner);
    this.known.set(`${org}\n${owner}`, true);
  }

  async isKeyOwner(org: string, user: string): Promise<boolean> {
    const known = `${org}\n${user}`;
    if (this.known.has(known)) return true;
    try {
      const owner = await this.ask(org, user);
      if (owner) this.known.set(known, true);
      return owner;
    } catch (err) {
      const snapshot = this.snapshots.get(org);
      if (snapshot && this.clock.now() - snapshot.at <= this.staleIfErrorMs) return snapshot.owners.has(user);
      throw new KeyOwnersUnavailable(err);
    }
  }

  /**
   * Asks Redis: whether `user` is in the set, or, when the whole set kept for
   * an outage is half its allowed age, the whole set (kept, dated when the
   * read began: a key made after it is not in it).
   */
  private async ask(org: string, user: string, filled = false): Promise<boolean> {
    const at = this.clock.now();
    const kept = this.snapshots.get(org);
    if (this.staleIfErrorMs > 0 && !(kept && at - kept.at < this.staleIfErrorMs / 2)) {
      const members = new Set(await this.redis.smembers(orgKeyOwnersKey(org)));
      if (members.delete(COMPLETE)) {
        if (members.size <= MAX_SNAPSHOT_OWNERS) this.snapshots.set(org, { owners: members, at });
        return members.has(user);
      }
    } else {
      const [owner, complete] = await this.redis.smismember(orgKeyOwnersKey(org), user, COMPLETE);
      if (complete) return owner === 1;
    }
    if (filled) throw new Error(`the key owners of ${org} were filled, yet lack their completeness mark`);
    await this.fill(org);
    return this.ask(org, user, true);
  }

  /**
   * Adds the owner of every key the organization has to the set, then the
   * completeness mark. Adding is a union: a key made meanwhile added its own
   * owner first, so nothing is lost whichever finishes first.
   */
  private fill(org: string): Promise<void> {
    let running = this.filling.get(org);
    if (!running) {
      running = (async () => {
        const ids = await this.redis.smembers(orgApiKeysKey(org));
        // One GET each: on a Redis Cluster the records are spread over the slots.
        const records = await Promise.all(ids.map((id) => this.redis.get(apiKeyRecordKey(id))));
        const owners = records
          .filter((json): json is string => json !== null)
          .map((json) => (JSON.parse(json) as { owner: string }).owner);
        await this.redis.sadd(orgKeyOwnersKey(org), ...owners, COMPLETE);
      })().finally(() => this.filling.delete(org));
      this.filling.set(org, running);
    }
    return running;
  }
}

/** What a key's policy is judged on. */
export interface ActingKey {
  org: string;
  owner: string;
  onBehalfOf?: OnBehalfOfPolicy | undefined;
}

/**
 * Whether a key may act as `user`: `asKeyOwner` when allowed for a user who
 * owns another key of the organization (only through the policy's `users`);
 * else why not.
 */
export type ActingDecision =
  | { allowed: true; asKeyOwner: boolean }
  | { allowed: false; why: "outside_policy" | "key_owner" };

/**
 * The one rule for "may this key act as that user", which every surface
 * applies (X-On-Behalf-Of, a token's subject, the token exchange, the MCP
 * proxy, eval runs): a key may act as its own owner; it never acts as a user
 * who owns (or owned) a key of its organization unless its policy names that
 * user in `users`; otherwise its policy decides. Throws when the
 * organization's key owners cannot be read (fail closed).
 */
export async function decideActingFor(
  key: ActingKey,
  user: string,
  owners: KeyOwners,
): Promise<ActingDecision> {
  if (user === key.owner) return { allowed: true, asKeyOwner: false };
  const policy = key.onBehalfOf ?? "any";
  if (policy === "none") return { allowed: false, why: "outside_policy" };
  if (policy !== "any") {
    if (policy.users?.includes(user))
      return { allowed: true, asKeyOwner: await owners.isKeyOwner(key.org, user) };
    if (!policy.prefixes?.some((prefix) => user.startsWith(prefix)))
      return { allowed: false, why: "outside_policy" };
  }
  if (await owners.isKeyOwner(key.org, user)) return { allowed: false, why: "key_owner" };
  return { allowed: true, asKeyOwner: false };
}

/**
 * `decideActingFor`, as a 403 when refused: `source` names where the user
 * came from (`X-On-Behalf-Of`, `externalUserId`, …). Returns whether the key
 * acts as another key's owner (which the gateway audits).
 */
export async function assertMayActFor(
  key: ActingKey,
  user: string,
  source: string,
  owners: KeyOwners,
): Promise<{ asKeyOwner: boolean }> {
  const decision = await decideActingFor(key, user, owners);
  if (decision.allowed) return { asKeyOwner: decision.asKeyOwner };
  throw forbidden(refusalMessage(key, user, source, decision.why));
}

function refusalMessage(
  key: ActingKey,
  user: string,
  source: string,
  why: "outside_policy" | "key_owner",
): string {
  return why === "key_owner"
    ? `${source} '${user}' owns an API key of this organization, and this API key's X-On-Behalf-Of policy does not name them in users`
    : `${source} '${user}' is outside this API key's X-On-Behalf-Of policy: it may act for ${describeOnBehalfOf(key.onBehalfOf)}`;
}
