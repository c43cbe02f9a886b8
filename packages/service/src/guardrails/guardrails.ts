import type { ResourceAuthorization } from "@gw/core/authz";
import { AppError, forbidden, ValidationFailed } from "@gw/core/errors";
import type { Check as GuardrailCheck } from "@gw/core/guardrails";
import { apiKeyRecordKey } from "@gw/core/on-behalf-of";
import type { Principal } from "@gw/core/principal";
import type { RedisClient } from "@gw/core/redis";
import type { Ids } from "../ids.ts";
import type { GuardrailResolver } from "./resolve.ts";
import {
  type AppliesTo,
  type Attachment,
  attachmentLabel,
  type GuardrailAction,
  type GuardrailActor,
  type GuardrailObject,
  type GuardrailPolicy,
  type GuardrailStore,
} from "./store.ts";

/** What attaching a guardrail beyond its owner's own key needs. */
export const ATTACH_BEYOND_OWN_KEY = "admin:api-keys";

/** Who owns an API key of an organization, as the gateway keeps keys in Redis. */
export interface KeyOwnersOf {
  /** The key's owner if it is a key of `org`; `undefined` for no such key (or another organization's). */
  ownerOf(org: string, keyId: string): Promise<string | undefined>;
}

/** Reads the gateway's key records (`gw:apikey:<id>`), as eval runs do. */
export class RedisKeyRecords implements KeyOwnersOf {
  private readonly redis: RedisClient;

  constructor(redis: RedisClient) {
    this.redis = redis;
  }

  async ownerOf(org: string, keyId: string): Promise<string | undefined> {
    let raw: string | null;
    try {
      raw = await this.redis.get(apiKeyRecordKey(keyId));
    } catch (err) {
      throw new AppError("service_unavailable", "API keys cannot be read; try again", {
        cause: err,
        reason: "api_key_store_unavailable",
      });
    }
    if (!raw) return undefined;
    const record = JSON.parse(raw) as { org?: string; owner?: string };
    return record.org === org ? record.owner : undefined;
  }
}

/**
 * The one rule for moving a guardrail (attaching, detaching, deleting it
 * with its attachments): every attachment added or removed must be to a key
 * of the organization that the principal's user owns, unless the principal
 * holds `admin:api-keys`, which also covers the organization, other users'
 * keys and model names (a model attachment applies to every key of the
 * organization). A key added must be one of the organization's (422
 * otherwise, the same for another organization's key as for none); a key
 * removed that no longer exists is the principal's to remove.
 */
export async function assertMayMoveGuardrail(
  principal: Principal,
  before: readonly Attachment[],
  after: readonly Attachment[],
  keys: KeyOwnersOf,
  /** What the refusal says is being done: moving the guardrail, or changing what it does where it is. */
  doing: "move" | "change" = "move",
): Promise<void> {
  const beyondOwnKey = doing === "move" ? movingBeyondOwnKey : changingBeyondOwnKey;
  const was = new Set(before.map(attachmentLabel));
  const will = new Set(after.map(attachmentLabel));
  const admin = principal.permissions.includes(ATTACH_BEYOND_OWN_KEY);
  const changed = [
    ...after.map((a, i) => ({ a, added: true, index: i })).filter(({ a }) => !was.has(attachmentLabel(a))),
    ...before.map((a) => ({ a, added: false, index: -1 })).filter(({ a }) => !will.has(attachmentLabel(a))),
  ];
  for (const { a, added, index } of changed) {
    if (a.scope !== "key") {
      if (!admin) throw beyondOwnKey();
      continue;
    }
    const owner = await keys.ownerOf(principal.org, a.key_id);
    if (owner === undefined) {
      if (added)
        throw new ValidationFailed([
          {
            loc: ["body", "attachments", index, "key_id"],
            msg: "No API key with this id in the organization",
            type: "value_error",
            input: a.key_id,
          },
        ]);
      continue;
    }
    if (owner !== principal.user && !admin) throw beyondOwnKey();
  }
}

const movingBeyondOwnKey = () =>
  forbidden(
    `Attaching a guardrail to its organization, a model or another user's API key, or detaching it from them, needs the '${ATTACH_BEYOND_OWN_KEY}' permission`,
    { reason: "missing_permission" },
  );

const changingBeyondOwnKey = () =>
  forbidden(
    `Changing the checks, direction or action of a guardrail attached to its organization, a model or another user's API key needs the '${ATTACH_BEYOND_OWN_KEY}' permission, as detaching it does`,
    { reason: "missing_permission" },
  );

/**
 * Guardrails as the routes and the model-call pipeline use them: their
 * records and attachments (`GuardrailStore`), their ownership in SpiceDB,
 * and resolution of the ones that apply to a call (`resolveGuardrails`).
 */
export class Guardrails {
  readonly store: GuardrailStore;
  private readonly resolver: GuardrailResolver;
  private readonly authorization: ResourceAuthorization;
  private readonly keys: KeyOwnersOf;
  private readonly ids: Ids;

  constructor(deps: {
    store: GuardrailStore;
    resolver: GuardrailResolver;
    authorization: ResourceAuthorization;
    keys: KeyOwnersOf;
    ids: Ids;
  }) {
    this.store = deps.store;
    this.resolver = deps.resolver;
    this.authorization = deps.authorization;
    this.keys = deps.keys;
    this.ids = deps.ids;
  }

  /** The guardrails that apply to a call of `keyId` in `org` asking for `model`, each once, oldest first (`version`: `GuardrailResolver.resolve`). */
  resolveGuardrails(
    org: string,
    keyId: string,
    model: string,
    version?: Promise<string | undefined>,
  ): Promise<GuardrailPolicy[]> {
    return this.resolver.resolve(org, keyId, model, version);
  }

  /** Reads the organization's guardrail version now, for a model call to resolve its guardrails with later (never rejects). */
  readVersion(org: string): Promise<string | undefined> {
    return this.resolver.readVersion(org);
  }

  /** Creates a guardrail the principal owns (SpiceDB first: if storing fails, the ownership is given back). */
  async create(
    actor: GuardrailActor,
    input: { name: string; checks: GuardrailCheck[]; applies_to: AppliesTo; action: GuardrailAction },
  ): Promise<GuardrailObject> {
    const id = this.ids.newId("gr");
    const resource = { type: "guardrail" as const, id };
    await this.authorization.createOwnership(actor.principal, resource);
    try {
      return await this.store.create(actor, { id, ...input });
    } catch (err) {
      await this.authorization.deleteResource(actor.principal, resource).catch(() => undefined);
      throw err;
    }
  }

  /**
   * Changes the guardrail (the principal a writer of it, checked by the route). Changing what it does
   * (its checks, direction or action) where it is attached is as much as detaching it there: beyond the
   * principal's own keys, it needs `admin:api-keys` too, so a guardrail an administrator put on the
   * organization is not emptied by a writer. A new name changes nothing it does.
   */
  update(
    actor: GuardrailActor,
    id: string,
    patch: Partial<Pick<GuardrailObject, "name" | "checks" | "applies_to" | "action">>,
  ): Promise<GuardrailObject | undefined> {
    const changesWhatItDoes =
      patch.checks !== undefined || patch.applies_to !== undefined || patch.action !== undefined;
    return this.store.update(actor, id, patch, async (attached) => {
      if (changesWhatItDoes) await assertMayMoveGuardrail(actor.principal, attached, [], this.keys, "change");
    });
  }

  /** Replaces where the guardrail is attached (the principal its owner, checked by the route). */
  setAttachments(actor: GuardrailActor, id: string, next: Attachment[]): Promise<Attachment[] | undefined> {
    return this.store.replaceAttachments(actor, id, next, (before) =>
      assertMayMoveGuardrail(actor.principal, before, next, this.keys),
    );
  }

  /**
   * Deletes the guardrail (the principal its owner, checked by the route):
   * its record and attachments first, which detaching them must allow, then
   * its relationships, guarded by the ownership when that delete lands. A
   * failure between leaves relationships without a guardrail, which name
   * nothing anyone can read.
   */
  async delete(actor: GuardrailActor, id: string): Promise<boolean> {
    const deleted = await this.store.delete(actor, id, (attached) =>
      assertMayMoveGuardrail(actor.principal, attached, [], this.keys),
    );
    if (deleted) await this.authorization.deleteResource(actor.principal, { type: "guardrail", id });
    return deleted;
  }
}
