import type { Clock } from "@gw/core/clock";
import { AppError } from "@gw/core/errors";
import { keyRefusal } from "@gw/core/key-standing";
import type { Limits, UnitLimits } from "@gw/core/limits";
import {
  apiKeyRecordKey,
  assertMayActFor,
  type KeyOwners,
  type OnBehalfOfPolicy,
  RedisKeyOwners,
} from "@gw/core/on-behalf-of";
import { MODEL_CALLS, type Permission } from "@gw/core/permissions";
import type { Principal } from "@gw/core/principal";
import type { RedisClient } from "@gw/core/redis";
import type { Caller } from "../budgets/admit-model-call.ts";

/**
 * The creator of an eval schedule, as its key stands now: an eval run has no
 * HTTP request and no gateway assertion, so it reads the key's record and
 * the organization's end-user defaults where the gateway keeps them (Redis:
 * `gw:apikey:<id>` and `gw:org:<org>:end-user-limits`, written by the
 * gateway's `ApiKeyStore` and `OrgLimitsStore`), judges the key as the
 * gateway would judge a request (usable, `evals:write` and the permission
 * model calls need, its on-behalf-of policy for the schedule's end user, by
 * the one rule of `@gw/core/on-behalf-of`), and resolves its limits as the
 * gateway does for a model call (the key's own windows; each end-user window
 * the key's own, else the organization's default).
 */
export interface CreatorKeys {
  /**
   * The caller a run acts as, or why it cannot run (the key revoked, expired
   * or deleted, a permission taken away, the end user outside its policy).
   * Throws when the key or its organization's key owners cannot be read.
   */
  callerOf(
    org: string,
    creator: { user: string; keyId: string },
    purpose?: KeyPurpose,
  ): Promise<Caller | { refused: string }>;
}

/** What a key is used for without a request: the permissions it needs, and how refusals name it. */
export interface KeyPurpose {
  needs: readonly { permission: Permission; why: string }[];
  /** "The API key that created the schedule". */
  key: string;
  /** "The schedule's end user". */
  endUser: string;
}

/** The fields of the gateway's key record that a run needs. */
interface KeyRecord {
  org: string;
  owner: string;
  permissions: Permission[];
  limits: Limits;
  models?: string[] | null;
  status: "active" | "revoked";
  expiresAt: string | null;
  onBehalfOf?: OnBehalfOfPolicy;
}

/** What a run needs of its creator key, beside the model allowlist the pipeline checks. */
const EVAL_RUN: KeyPurpose = {
  needs: [
    { permission: "evals:write", why: "" },
    { permission: MODEL_CALLS, why: ", which model calls need" },
  ],
  key: "The API key that created the schedule",
  endUser: "The schedule's end user",
};

const recordKey = apiKeyRecordKey;
const orgLimitsKey = (org: string) => `gw:org:${org}:end-user-limits`;

export class RedisCreatorKeys implements CreatorKeys {
  private readonly redis: RedisClient;
  private readonly clock: Clock;
  private readonly owners: KeyOwners;

  /** `clock`: its wall time decides whether the creator's key has expired; `owners`: the organization's key owners. */
  constructor(redis: RedisClient, clock: Clock, owners: KeyOwners = new RedisKeyOwners(redis)) {
    this.redis = redis;
    this.clock = clock;
    this.owners = owners;
  }

  async callerOf(org: string, creator: { user: string; keyId: string }, purpose: KeyPurpose = EVAL_RUN) {
    const [json, defaults] = await Promise.all([
      this.redis.get(recordKey(creator.keyId)),
      this.redis.get(orgLimitsKey(org)),
    ]);
    const record = json ? (JSON.parse(json) as KeyRecord) : undefined;
    if (!record || record.org !== org) return { refused: `${purpose.key} was deleted` };
    const refusal = keyRefusal(record, this.clock.wall());
    if (refusal === "revoked") return { refused: `${purpose.key} was revoked` };
    if (refusal === "expired") return { refused: `${purpose.key} has expired` };
    for (const { permission, why } of purpose.needs) {
      if (!record.permissions.includes(permission))
        return { refused: `${purpose.key} no longer has the permission '${permission}'${why}` };
    }
    try {
      await assertMayActFor(record, creator.user, purpose.endUser, this.owners);
    } catch (err) {
      if (err instanceof AppError && err.code === "forbidden") return { refused: err.message };
      throw err;
    }
    const principal: Principal = {
      org,
      user: creator.user,
      keyId: creator.keyId,
      permissions: record.permissions,
      models: record.models ?? undefined,
      credential: "api_key",
      onBehalfOf: creator.user !== record.owner,
    };
    const limits: Limits = { ...record.limits };
    const endUser = endUserLimits(
      defaults ? (JSON.parse(defaults) as UnitLimits) : {},
      record.limits.endUser,
    );
    if (endUser) limits.endUser = endUser;
    else delete limits.endUser;
    // Nothing was counted by a gateway: the run's request is counted with its tokens.
    return { principal, admission: { limits }, requestsCounted: false } satisfies Caller;
  }
}

/** Each end-user window: the key's own, else the organization's default (as the gateway merges them). */
function endUserLimits(defaults: UnitLimits, own: UnitLimits | undefined): UnitLimits | undefined {
  const { tokens: defaultTokens, spend: defaultSpend, ...defaultRequests } = defaults;
  const { tokens, spend, ...requests } = own ?? {};
  const merged: UnitLimits = { ...defaultRequests, ...requests };
  const mergedTokens = { ...defaultTokens, ...tokens };
  const mergedSpend = { ...defaultSpend, ...spend };
  if (Object.keys(mergedTokens).length > 0) merged.tokens = mergedTokens;
  if (Object.keys(mergedSpend).length > 0) merged.spend = mergedSpend;
  return Object.keys(merged).length > 0 ? merged : undefined;
}
