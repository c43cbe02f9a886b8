import { type Clock, systemClock } from "@gw/core/clock";
import { AppError } from "@gw/core/errors";
import { apiKeyRecordKey, orgApiKeysKey, RedisKeyOwners } from "@gw/core/on-behalf-of";
import { DEFAULT_PERMISSIONS } from "@gw/core/permissions";
import type { RedisClient } from "@gw/core/redis";
import { patchLimits } from "./limits.ts";
import type { CreateApiKeyInput, UpdateApiKeyInput } from "./schema.ts";
import { generateSecret, hashSecret, newKeyId, secretStart } from "./secret.ts";
import { type ApiKeyRecord, type ListedApiKey, toView } from "./types.ts";

/** Redis channel on which every change to a key is announced, so replicas drop cached copies. */
export const API_KEY_EVENTS_CHANNEL = "gw:apikey-events";

const recordKey = apiKeyRecordKey;
const hashKey = (hash: string) => `gw:apikey-hash:${hash}`;
const orgKey = orgApiKeysKey;
const usedKey = (id: string) => `gw:apikey-used:${id}`;

// Replaces a record only if nobody changed it since it was read, and tells every replica.
const CAS_SCRIPT = `
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[2])
redis.call('PUBLISH', ARGV[3], ARGV[4])
return 1
`;

export class DuplicateSecretError extends AppError {
  constructor() {
    super("conflict", "A key with this secret already exists", { reason: "duplicate_secret" });
    this.name = "DuplicateSecretError";
  }
}

/** Attempts of a compare-and-set before a change gives up to others changing the same key. */
export const MAX_CHANGE_ATTEMPTS = 10;

/** Others kept changing the key between our read and our write, every time: the caller may try again. */
export class ApiKeyChangedConcurrently extends AppError {
  constructor(id: string) {
    super("conflict", `API key ${id} is being changed concurrently; try again`, {
      reason: "api_key_changed_concurrently",
    });
    this.name = "ApiKeyChangedConcurrently";
  }
}

/**
 * API keys in Redis: `gw:apikey:<id>` holds the record (JSON),
 * `gw:apikey-hash:<sha256>` maps a secret's hash to its id (the O(1)
 * lookup), `gw:org:<org>:apikeys` lists an organization's ids and
 * `gw:org:<org>:key-owners` its keys' owners (`RedisKeyOwners`). They are
 * found by different things (id, secret, organization), so on a Redis
 * Cluster they live on different slots: no command or script touches two of
 * them at once.
 */
export class ApiKeyStore {
  private readonly redis: RedisClient;
  private readonly listeners: ((id: string) => void)[] = [];
  private readonly clock: Clock;
  private readonly owners: RedisKeyOwners;

  /** `clock`: its wall time stamps creation and revocation; `owners`: the organization's key owners, told of each new key. */
  constructor(redis: RedisClient, clock: Clock = systemClock, owners = new RedisKeyOwners(redis)) {
    this.redis = redis;
    this.clock = clock;
    this.owners = owners;
  }

  /**
   * Called after this process changed a key, before the change is reported to
   * the caller: other replicas learn it through Redis pub/sub, this one must
   * not answer from a stale copy even for a moment.
   */
  onChange(listener: (id: string) => void): void {
    this.listeners.push(listener);
  }

  /** Creates a key; `secret` is for the bootstrap key only; normally a fresh one is generated. */
  async create(
    input: CreateApiKeyInput,
    secret = generateSecret(),
  ): Promise<{ record: ApiKeyRecord; secret: string }> {
    const record: ApiKeyRecord = {
      id: newKeyId(),
      org: input.org,
      owner: input.owner,
      name: input.name ?? null,
      permissions: [...(input.permissions ?? DEFAULT_PERMISSIONS)],
      limits: patchLimits({}, input.limits),
      models: input.models ? [...input.models] : null,
      status: "active",
      createdAt: new Date(this.clock.wall()).toISOString(),
      expiresAt: input.expiresAt ? new Date(input.expiresAt).toISOString() : null,
      revokedAt: null,
      start: secretStart(secret),
      hash: hashSecret(secret),
      onBehalfOf: input.onBehalfOf ?? "any",
      cache: input.cache ?? "off",
    };
    // The owner is protected from other keys' X-On-Behalf-Of before the key exists anywhere, so no
    // replica ever lets another key act as them (if the create fails after, they stay protected).
    await this.owners.add(record.org, record.owner);
    // The record first: nothing finds it by its secret until the hash points at it. Claiming the
    // hash is the one step that decides, so two writers can never store two records for one secret
    // (e.g. two replicas applying the same bootstrap key at once); the loser takes its record back.
    await Promise.all([
      this.redis.set(recordKey(record.id), JSON.stringify(record), "NX"),
      this.redis.sadd(orgKey(record.org), record.id),
    ]);
    if ((await this.redis.set(hashKey(record.hash), record.id, "NX")) !== "OK") {
      await Promise.all([
        this.redis.del(recordKey(record.id)),
        this.redis.srem(orgKey(record.org), record.id),
      ]);
      throw new DuplicateSecretError();
    }
    return { record, secret };
  }

  async get(id: string): Promise<ApiKeyRecord | undefined> {
    const json = await this.redis.get(recordKey(id));
    return json ? (JSON.parse(json) as ApiKeyRecord) : undefined;
  }

  async findByHash(hash: string): Promise<ApiKeyRecord | undefined> {
    const id = await this.redis.get(hashKey(hash));
    return id ? this.get(id) : undefined;
  }

  /** Notes that the key authenticated a request now (kept apart from the record: no compare-and-set on the hot path). */
  async markUsed(id: string, at: Date): Promise<void> {
    await this.redis.set(usedKey(id), at.toISOString());
  }

  /** When each key last authenticated a request (as `markUsed` noted it), or `null`. */
  async lastUsed(ids: string[]): Promise<Map<string, string | null>> {
    const values = await Promise.all(ids.map((id) => this.redis.get(usedKey(id))));
    return new Map(ids.map((id, i) => [id, values[i] ?? null]));
  }

  async listByOrg(org: string): Promise<ApiKeyRecord[]> {
    const ids = await this.redis.smembers(orgKey(org));
    if (ids.length === 0) return [];
    // One GET each rather than MGET: the records are spread over the cluster's slots.
    const jsons = await Promise.all(ids.map((id) => this.redis.get(recordKey(id))));
    return jsons
      .filter((json): json is string => json !== null)
      .map((json) => JSON.parse(json) as ApiKeyRecord)
      .sort((a, b) => a.createdAt.localeCompare(b.createdAt) || a.id.localeCompare(b.id));
  }

  async update(id: string, patch: UpdateApiKeyInput): Promise<ApiKeyRecord | undefined> {
    return this.modify(id, (record) => {
      if (patch.name !== undefined) record.name = patch.name;
      if (patch.permissions !== undefined) record.permissions = [...patch.permissions];
      if (patch.onBehalfOf !== undefined) record.onBehalfOf = patch.onBehalfOf;
      if (patch.cache !== undefined) record.cache = patch.cache;
      if (patch.models !== undefined) record.models = patch.models === null ? null : [...patch.models];
      if (patch.expiresAt !== undefined) {
        record.expiresAt = patch.expiresAt === null ? null : new Date(patch.expiresAt).toISOString();
      }
      if (patch.limits !== undefined) {
        record.limits = patchLimits(record.limits, patch.limits);
      }
    });
  }

  /** Revocation is final; revoking a revoked key changes nothing. */
  async revoke(id: string): Promise<ApiKeyRecord | undefined> {
    return this.modify(id, (record) => {
      if (record.status === "revoked") return;
      record.status = "revoked";
      record.revokedAt = new Date(this.clock.wall()).toISOString();
    });
  }

  /**
   * Read-modify-write as compare-and-set, announcing the change in the same
   * atomic step. A change lost to another is applied again to the newer
   * record (a PATCH names fields, so it still means the same), a bounded
   * number of times.
   */
  private async modify(
    id: string,
    change: (record: ApiKeyRecord) => void,
  ): Promise<ApiKeyRecord | undefined> {
    for (let attempt = 0; attempt < MAX_CHANGE_ATTEMPTS; attempt++) {
      const before = await this.redis.get(recordKey(id));
      if (!before) return undefined;
      const record = JSON.parse(before) as ApiKeyRecord;
      change(record);
      const after = JSON.stringify(record);
      const swapped = await this.redis.eval(
        CAS_SCRIPT,
        1,
        recordKey(id),
        before,
        after,
        API_KEY_EVENTS_CHANNEL,
        id,
      );
      if (swapped === 1) {
        for (const listener of this.listeners) listener(id);
        return record;
      }
    }
    throw new ApiKeyChangedConcurrently(id);
  }
}

/** The keys as listings show them at `now` (the admin API's and `pnpm keys list` and `get`): each with `lastUsedAt`. */
export async function listedKeys(
  store: Pick<ApiKeyStore, "lastUsed">,
  records: ApiKeyRecord[],
  now: number,
): Promise<ListedApiKey[]> {
  const used = await store.lastUsed(records.map((r) => r.id));
  return records.map((r) => ({ ...toView(r, now), lastUsedAt: used.get(r.id) ?? null }));
}
