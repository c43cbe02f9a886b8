import type { Clock } from "@gw/core/clock";
import type { RedisClient } from "@gw/core/redis";
import type { Attachment, GuardrailPolicy, GuardrailStore } from "./store.ts";

/** Where an organization's guardrail version lives in Redis: one more at every change that moves resolution. */
export const guardrailVersionKey = (org: string) => `gw:guardrails:${org}:version`;

/** Tells every replica that the organization's guardrails changed: called after the change committed. */
export async function guardrailsChanged(redis: RedisClient, org: string): Promise<void> {
  await redis.incr(guardrailVersionKey(org));
}

/**
 * How long a replica keeps an organization's policies at most, even when the
 * version says they still hold: the bound on staleness if a change landed in
 * PostgreSQL but its version bump was lost (Redis failed right after).
 */
export const MAX_CACHE_AGE_MS = 30_000;
/** Organizations whose policies one replica keeps at most (the oldest entry leaves first). */
export const MAX_CACHED_ORGANIZATIONS = 10_000;

/** An organization's attached guardrails, indexed by where they apply. */
interface OrgPolicies {
  version: string;
  at: number;
  organization: GuardrailPolicy[];
  byKey: Map<string, GuardrailPolicy[]>;
  byModel: Map<string, GuardrailPolicy[]>;
  /** Each guardrail's place in the organization's order (oldest first). */
  rank: Map<string, number>;
}

export interface ResolverHooks {
  /** After loading the policies, before keeping them: tests put a change there. */
  beforeKeep?: (org: string) => Promise<void>;
}

/**
 * Which guardrails apply to a call: those attached to the caller's
 * organization, to its key, or to the model name it asks for, each once,
 * oldest first. Every replica keeps an organization's policies with the
 * version they were loaded at (read from Redis before loading), and each
 * resolution reads the version again: a change bumps it after it commits, so
 * the next resolution anywhere loads anew, and a load that raced a change is
 * kept under the old version and thrown away at once. Without Redis the
 * policies are read from PostgreSQL on every call (never a stale answer).
 */
export class GuardrailResolver {
  private readonly store: GuardrailStore;
  private readonly redis: RedisClient;
  private readonly clock: Clock;
  private readonly hooks: ResolverHooks;
  private readonly cache = new Map<string, OrgPolicies>();

  constructor(store: GuardrailStore, redis: RedisClient, options: { clock: Clock; hooks?: ResolverHooks }) {
    this.store = store;
    this.redis = redis;
    this.clock = options.clock;
    this.hooks = options.hooks ?? {};
  }

  /**
   * The guardrails that apply to a call of `keyId` in `org` asking for
   * `model`, each once, oldest first; `version`: the organization's version
   * as the request already read it (`readVersion`, asked beside the
   * request's replay guard), else read now.
   */
  async resolve(
    org: string,
    keyId: string,
    model: string,
    version?: Promise<string | undefined>,
  ): Promise<GuardrailPolicy[]> {
    const policies = await this.policiesOf(org, version instanceof Promise ? version : this.readVersion(org));
    const found = new Map<string, GuardrailPolicy>();
    for (const list of [policies.organization, policies.byKey.get(keyId), policies.byModel.get(model)])
      for (const policy of list ?? []) found.set(policy.id, policy);
    return [...found.values()].sort((a, b) => policies.rank.get(a.id)! - policies.rank.get(b.id)!);
  }

  /** The organization's guardrail version in Redis; `undefined` when Redis cannot say (never rejects). */
  readVersion(org: string): Promise<string | undefined> {
    return this.redis.get(guardrailVersionKey(org)).then(
      (version) => version ?? "0",
      () => undefined,
    );
  }

  private async policiesOf(org: string, read: Promise<string | undefined>): Promise<OrgPolicies> {
    const version = await read;
    // Changes cannot be seen without Redis: read them where they are kept.
    if (version === undefined) return this.load(org, "");
    const kept = this.cache.get(org);
    if (kept && kept.version === version && this.clock.now() - kept.at < MAX_CACHE_AGE_MS) return kept;
    const loaded = await this.load(org, version);
    await this.hooks.beforeKeep?.(org);
    this.cache.delete(org);
    if (this.cache.size >= MAX_CACHED_ORGANIZATIONS) this.cache.delete(this.cache.keys().next().value!);
    this.cache.set(org, loaded);
    return loaded;
  }

  private async load(org: string, version: string): Promise<OrgPolicies> {
    const at = this.clock.now();
    const attached = await this.store.attachedPolicies(org);
    const policies: OrgPolicies = {
      version,
      at,
      organization: [],
      byKey: new Map(),
      byModel: new Map(),
      rank: new Map(),
    };
    attached.forEach(({ policy, attachments }, i) => {
      policies.rank.set(policy.id, i);
      for (const a of attachments) place(policies, a, policy);
    });
    return policies;
  }
}

function place(policies: OrgPolicies, a: Attachment, policy: GuardrailPolicy): void {
  if (a.scope === "organization") {
    policies.organization.push(policy);
    return;
  }
  const map = a.scope === "key" ? policies.byKey : policies.byModel;
  const target = a.scope === "key" ? a.key_id : a.model;
  const list = map.get(target);
  if (list) list.push(policy);
  else map.set(target, [policy]);
}
