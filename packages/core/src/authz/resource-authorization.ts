import { type Clock, systemClock } from "../clock.ts";
import { AppError } from "../errors.ts";
import type { Logger } from "../logger.ts";
import type { Principal } from "../principal.ts";
import {
  type ConsistencyTokens,
  type LastWriteRead,
  recordDeletion,
  setTogether,
  UNKNOWN_LAST_WRITE,
} from "./consistency-tokens.ts";
import { type DecisionCache, EXPIRIES_UNKNOWN } from "./decision-cache.ts";
import type { GrantExpiries } from "./grant-expiries.ts";
import {
  fitsObjectId,
  PERMISSION_FOR_ROLE,
  PUBLIC_USER,
  type ResourceType,
  ROLES,
  type Role,
  scopedId,
  serviceIssuedDelete,
  subjectId,
  unscopedId,
} from "./identity.ts";
import {
  administratorContext,
  built,
  callerIsOwner,
  FULLY_CONSISTENT,
  fromTimestamp,
  MINIMIZE_LATENCY,
  objectRef,
  organizationTokenKey,
  organizationUpdates,
  ownerFilter,
  type ResourceRef,
  resourceFilter,
  subjectContext,
  tokenKey,
  update,
  userRef,
} from "./relationships.ts";
import { isFailedPrecondition, type SpiceDBClient, v1 } from "./spicedb-client.ts";

/**
 * The caller may not change roles on this resource, or see who holds them or its trail (also when it does
 * not exist, so existence does not leak). `what`: what only an owner may do (the contract's words for a
 * grant or a revoke).
 */
export class NotResourceOwner extends AppError {
  constructor(what = "grant or revoke permissions") {
    super("forbidden", `Only resource owners can ${what}`, { contractBody: true });
    this.name = "NotResourceOwner";
  }
}

/** Neither an owner of the resource nor an administrator of its organization (also when it does not exist). */
export class NotInspector extends AppError {
  constructor() {
    super(
      "forbidden",
      "Only the resource's owners and its organization's administrators see who holds its roles",
    );
    this.name = "NotInspector";
  }
}

/** The change would leave the resource without an owner. */
export class LastOwner extends AppError {
  constructor() {
    super("conflict", "The last owner of a resource cannot be removed or demoted", { reason: "last_owner" });
    this.name = "LastOwner";
  }
}

/** The resource already has an owner: it was registered (or created) before. */
export class AlreadyRegistered extends AppError {
  constructor() {
    super("conflict", "This resource is already registered: it has an owner", {
      reason: "already_registered",
    });
    this.name = "AlreadyRegistered";
  }
}

/**
 * The platform API was asked to register, or delete the authorization of, a
 * resource whose id the service issues (`serviceIssuedDelete`): the service
 * owns that lifecycle, whatever the id and whether or not it exists.
 */
export class ServiceIssuedResource extends AppError {
  constructor(type: ResourceType, action: "register" | "delete", serviceDelete: string) {
    super(
      "conflict",
      action === "register"
        ? `A ${type} id is issued by the service, which makes its creator the owner: it cannot be registered`
        : `A ${type}'s authorization goes with its content: delete it with ${serviceDelete}`,
      { reason: "service_issued_id" },
    );
    this.name = "ServiceIssuedResource";
  }
}

export interface RoleChange extends ResourceRef {
  /** A user of the principal's organization, or `*` for all of them (never with `owner`). */
  userId: string;
  role: Role;
  /** When a writer or reader grant ends; owners never expire. */
  expiresAt?: Date;
}

/** One user's role on a resource, as `grants` lists it. */
export interface Grant {
  /** The user's own id in the organization, or `*`. */
  userId: string;
  role: Role;
  expiresAt?: Date;
}

/** A page of resource ids, in order of id; `more` when others follow the last. */
export interface ResourcePage {
  resourceIds: string[];
  more: boolean;
}

/** Runs between a role check and the write it guards; tests use it to force interleavings. */
export type BeforeWriteHook = (
  operation: "grant" | "revoke" | "delete",
  principal: Principal,
  resource: ResourceRef,
) => Promise<void>;

/**
 * Seams a test injects (production passes none) to hold a write between its
 * check and its write; read at each call, so a test may change them.
 */
export interface AuthorizationHooks {
  /** Awaited right after the ownership check of a grant or revoke, before anything else is read. */
  afterCheck?: BeforeWriteHook;
  /** Awaited after the ownership check, before the guarded write. */
  beforeWrite?: BeforeWriteHook;
  /** Awaited after SpiceDB answered a check, before the decision cache keeps its answer. */
  beforeKeep?: (principal: Principal, resource: ResourceRef, allowed: boolean) => Promise<void>;
}

const ROLE_ORDER: Record<Role, number> = { owner: 0, writer: 1, reader: 2 };

/** Types whose owner relationships may expire with their content (the service's `ownership` lifetimes, a file's own expiry). */
const CONTENT_EXPIRES: ReadonlySet<ResourceType> = new Set(["response", "completion", "file"]);

/** How long new resources of a type are owned: the retention of their content, in ms. */
export interface OwnershipLifetimes {
  lifetimes: Partial<Record<ResourceType, number>>;
}

/** What a `ResourceAuthorization` may be given besides SpiceDB and the ZedToken store. */
export interface ResourceAuthorizationOptions {
  logger?: Logger | undefined;
  /** Where `check` keeps its decisions; none: every check asks SpiceDB. */
  decisions?: DecisionCache | undefined;
  /**
   * Where the ends of expiring grants are recorded and read (PostgreSQL in
   * the processes). None: no decision to allow is kept (`EXPIRIES_UNKNOWN`).
   */
  expiries?: GrantExpiries | undefined;
  /** Types whose content expires: their owner relationships expire with it. */
  ownership?: OwnershipLifetimes | undefined;
  /** Test seams (production passes none). */
  hooks?: AuthorizationHooks | undefined;
  /** Its wall time starts owner relationships' expiries, as SpiceDB's clock counts them; the system clock by default. */
  clock?: Clock | undefined;
}

/**
 * Per-resource roles on SpiceDB. Resources and users are always those of the
 * principal's organization: ids are composed here, from the principal, never
 * taken whole from the caller.
 *
 * Every owner-only write carries a precondition that the caller is still an
 * owner when it lands (docs/adr/0009-check-and-write-together.md): the check before it only
 * chooses the answer, the precondition decides. Writes return their ZedToken.
 */
export class ResourceAuthorization {
  private readonly spicedb: SpiceDBClient;
  private readonly tokens: ConsistencyTokens;
  private readonly logger: Logger | undefined;
  private readonly decisions: DecisionCache | undefined;
  private readonly hooks: AuthorizationHooks;
  /** Last-write reads asked in the current run (cleared at its end), by key: see `lastWrite`. */
  private readonly sameRunReads = new Map<string, Promise<LastWriteRead>>();
  private readonly expiries: GrantExpiries | undefined;
  private readonly ownership: OwnershipLifetimes | undefined;
  private readonly clock: Clock;

  constructor(spicedb: SpiceDBClient, tokens: ConsistencyTokens, options: ResourceAuthorizationOptions = {}) {
    this.spicedb = spicedb;
    this.tokens = tokens;
    this.logger = options.logger;
    this.decisions = options.decisions;
    this.expiries = options.expiries;
    this.ownership = options.ownership;
    this.hooks = options.hooks ?? {};
    this.clock = options.clock ?? systemClock;
  }

  /**
   * Makes the principal the owner of a resource it just created (with a
   * fresh id). For a type whose content expires (`ownership`), the owner
   * relationship expires with it: from then on SpiceDB itself answers as if
   * the resource were gone (checks, lookups, grants), before any sweep.
   * `expiresAt`, when given, is this resource's own end (a file's
   * `expires_after`), over its type's lifetime. Throws if that cannot be written.
   */
  async createOwnership(
    principal: Principal,
    resource: ResourceRef,
    options: { expiresAt?: Date } = {},
  ): Promise<string | undefined> {
    const lifetime = this.ownership?.lifetimes[resource.type];
    const expiresAt =
      options.expiresAt ?? (lifetime === undefined ? undefined : new Date(this.clock.wall() + lifetime));
    return this.write(
      principal.org,
      resource,
      [ownerUpdate(principal, resource, expiresAt), ...organizationUpdates(principal.org, resource)],
      [],
      { unseen: true },
    );
  }

  /**
   * Makes the principal the owner of a resource another backend created, in
   * one write with a precondition that it has no owner yet: of two
   * registrations at once, one lands and the other is `AlreadyRegistered`.
   * Never for a type whose ids the service issues (`ServiceIssuedResource`).
   */
  async register(principal: Principal, resource: ResourceRef): Promise<string | undefined> {
    const serviceDelete = serviceIssuedDelete(resource.type, resource.id);
    if (serviceDelete) throw new ServiceIssuedResource(resource.type, "register", serviceDelete);
    const noOwner = built(v1.Precondition, {
      operation: v1.Precondition_Operation.MUST_NOT_MATCH,
      filter: ownerFilter(principal.org, resource),
    });
    try {
      return await this.write(
        principal.org,
        resource,
        [ownerUpdate(principal, resource), ...organizationUpdates(principal.org, resource)],
        [noOwner],
      );
    } catch (err) {
      if (isFailedPrecondition(err)) throw new AlreadyRegistered();
      throw err;
    }
  }

  /**
   * `deleteResource` for resources another backend registered: never for a
   * type whose ids the service issues, whose authorization goes only with its
   * content (`ServiceIssuedResource`, before any ownership is asked, so it
   * tells nothing of the resource).
   */
  async deleteRegistered(principal: Principal, resource: ResourceRef): Promise<string | undefined> {
    const serviceDelete = serviceIssuedDelete(resource.type, resource.id);
    if (serviceDelete) throw new ServiceIssuedResource(resource.type, "delete", serviceDelete);
    return this.deleteResource(principal, resource);
  }

  /**
   * Removes every relationship of a resource, if the principal still owns it
   * when the delete lands; the delete's ZedToken becomes the resource's.
   */
  async deleteResource(principal: Principal, resource: ResourceRef): Promise<string | undefined> {
    await this.assertOwner(principal, resource);
    await this.hooks.beforeWrite?.("delete", principal, resource);
    const response = await this.guarded(principal, resource, () =>
      this.spicedb.deleteRelationships(
        built(v1.DeleteRelationshipsRequest, {
          relationshipFilter: resourceFilter(principal.org, resource),
          optionalPreconditions: [callerIsOwner(principal, resource)],
        }),
      ),
    );
    const token = response.deletedAt?.token;
    const failed = await recordDeletion(
      this.tokens,
      { resource: tokenKey(principal.org, resource), organization: organizationTokenKey(principal.org) },
      token,
    );
    if (failed)
      this.logger?.warn(
        { err: failed.message },
        "could not keep the ZedToken of a delete; checks may lag briefly",
      );
    return token;
  }

  /**
   * The last-write token of each resource ("" when none is kept): every
   * grant, revoke, register and delete through here writes a new one, in
   * Redis for every replica, so an answer kept under these tokens (the
   * response cache's) is never served after a change of who may read them.
   * Fails when Redis cannot say.
   */
  async versions(org: string, resources: ResourceRef[]): Promise<string[]> {
    const written = await Promise.all(resources.map((r) => this.tokens.get(tokenKey(org, r))));
    return written.map((last) => last?.token ?? "");
  }

  /**
   * Whether the principal holds `role` on the resource, directly, through a
   * higher role, or publicly. With a decision cache, the resource's
   * last-write token, read for SpiceDB's consistency anyway, also says
   * whether a kept decision still holds (see `DecisionCache`).
   */
  async check(principal: Principal, resource: ResourceRef, role: Role): Promise<boolean> {
    // An id SpiceDB cannot hold names nothing: no one holds a role on it (asking would fail the call).
    if (!fitsObjectId(principal.org, resource.id)) return false;
    return this.decide(principal, resource, objectRef(principal.org, resource), PERMISSION_FOR_ROLE[role]);
  }

  /**
   * `permission` on `object`, an object every change of which writes `governing`'s last-write token
   * too (an MCP tool and its server: a tool policy, a grant and a revoke on the server all write the
   * server's): asked as fresh as `governing`, with kept decisions held to its token and its grants'
   * expiries exactly as `check`'s are.
   */
  async checkGoverned(
    principal: Principal,
    governing: ResourceRef,
    object: v1.ObjectReference,
    permission: string,
  ): Promise<boolean> {
    return this.decide(principal, governing, object, permission);
  }

  private async decide(
    principal: Principal,
    governing: ResourceRef,
    object: v1.ObjectReference,
    permission: string,
  ): Promise<boolean> {
    const key = tokenKey(principal.org, governing);
    const subject = scopedId(principal.org, principal.user);
    const cache = this.decisions;
    const askedAt = cache?.clock.wall() ?? 0;
    const last = await this.lastWrite(key);
    // The caveat context is the subject's organization, also part of `subject`; a key part of its own all the same.
    const decisionKey = cache
      ? `${key}\u0000${object.objectType}:${object.objectId}\u0000${subject}\u0000${permission}\u0000${principal.org}`
      : "";
    const kept = cache?.get(decisionKey, last);
    if (kept !== undefined) return kept;
    // When a grant it may rest on ends, read beside the check (a grant written since writes a new token).
    const nextExpiry = cache ? this.nextExpiry(key, askedAt) : undefined;
    const response = await this.spicedb.checkPermission(
      built(v1.CheckPermissionRequest, {
        consistency: consistencyAfter(last),
        resource: object,
        permission,
        subject: userRef(subject),
        context: subjectContext(principal.org),
      }),
    );
    const { HAS_PERMISSION, NO_PERMISSION } = v1.CheckPermissionResponse_Permissionship;
    const allowed = response.permissionship === HAS_PERMISSION;
    // Kept only when definite: a conditional answer needs caveat context, which every check sends.
    if (cache && (allowed || response.permissionship === NO_PERMISSION)) {
      const expiry = await nextExpiry;
      if (this.hooks.beforeKeep) await this.hooks.beforeKeep(principal, governing, allowed);
      cache.set(decisionKey, last, allowed, askedAt, expiry);
    }
    return allowed;
  }

  /** The first end of a grant on the resource after `after`; `EXPIRIES_UNKNOWN` when none are recorded here or they cannot be read. */
  private async nextExpiry(
    key: string,
    after: number,
  ): Promise<number | undefined | typeof EXPIRIES_UNKNOWN> {
    if (!this.expiries) return EXPIRIES_UNKNOWN;
    try {
      return await this.expiries.next(key, after);
    } catch (err) {
      this.logger?.warn(
        { err: (err as Error).message },
        "could not read when grants end; an allow is not kept",
      );
      return EXPIRIES_UNKNOWN;
    }
  }

  /**
   * Whether the principal holds each `role` on each resource, in one
   * CheckBulkPermissions as fresh as the organization's last write through
   * here (fully consistent right after one), never from kept decisions: for
   * what must hold at this moment, such as every stored response and
   * conversation a model call draws its context from. In the order asked.
   */
  async checkAll(principal: Principal, checks: { resource: ResourceRef; role: Role }[]): Promise<boolean[]> {
    // One id SpiceDB cannot hold would fail the whole bulk call: it is no one's, so it is not asked.
    const askable = checks.filter(({ resource }) => fitsObjectId(principal.org, resource.id));
    if (askable.length === 0) return checks.map(() => false);
    const subject = userRef(scopedId(principal.org, principal.user));
    const context = subjectContext(principal.org);
    const response = await this.spicedb.checkBulkPermissions(
      built(v1.CheckBulkPermissionsRequest, {
        consistency: await this.consistency(organizationTokenKey(principal.org)),
        items: askable.map(({ resource, role }) =>
          built(v1.CheckBulkPermissionsRequestItem, {
            resource: objectRef(principal.org, resource),
            permission: PERMISSION_FOR_ROLE[role],
            subject,
            context,
          }),
        ),
      }),
    );
    const decided = new Map<string, boolean>();
    for (const pair of response.pairs) {
      const asked = pair.request;
      if (!asked?.resource) continue;
      const key = `${asked.resource.objectType}\u0000${asked.resource.objectId}\u0000${asked.permission}`;
      // An error for one item (or a conditional answer) is no permission: fail closed.
      decided.set(
        key,
        pair.response.oneofKind === "item" &&
          pair.response.item.permissionship === v1.CheckPermissionResponse_Permissionship.HAS_PERMISSION,
      );
    }
    return checks.map(({ resource, role }) => {
      const ref = objectRef(principal.org, resource);
      return decided.get(`${ref.objectType}\u0000${ref.objectId}\u0000${PERMISSION_FOR_ROLE[role]}`) ?? false;
    });
  }

  /**
   * The resources of `type` on which the principal holds at least `role`,
   * in order of id, `limit` at a time, starting after the id `after`. Every
   * page is one LookupResources as fresh as the organization's last write
   * (like `check` for one resource), so a page never lists what was revoked
   * before it, and paging needs no snapshot of SpiceDB's: a position is an id,
   * valid across any number of writes. A resource readable throughout the
   * paging is listed exactly once. SpiceDB's order is its own, so each page
   * reads every resource the principal can see and sorts them.
   */
  async lookup(
    principal: Principal,
    type: ResourceType,
    role: Role,
    page: { limit: number; after?: string | undefined },
  ): Promise<ResourcePage> {
    const results = await this.spicedb.lookupResources(
      built(v1.LookupResourcesRequest, {
        consistency: await this.consistency(organizationTokenKey(principal.org)),
        resourceObjectType: type,
        permission: PERMISSION_FOR_ROLE[role],
        subject: userRef(scopedId(principal.org, principal.user)),
        context: subjectContext(principal.org),
      }),
    );
    const readable = new Set<string>();
    for (const result of results) {
      const { org, id } = unscopedId(result.resourceObjectId);
      const granted = result.permissionship === v1.LookupPermissionship.HAS_PERMISSION;
      // The schema keeps organizations apart; this only makes sure a broken schema fails closed.
      if (org === principal.org && granted) readable.add(id);
      else
        this.logger?.error({ resource: result.resourceObjectId }, "lookup returned a resource it should not");
    }
    const after = page.after;
    const following = [...readable].filter((id) => after === undefined || id > after).sort(byCodeUnits);
    return { resourceIds: following.slice(0, page.limit), more: following.length > page.limit };
  }

  /** Who holds which role on the resource (owners only; expired grants are gone). */
  async grants(principal: Principal, resource: ResourceRef): Promise<Grant[]> {
    await this.assertOwner(principal, resource, "see who holds its roles");
    return this.listGrants(principal.org, resource);
  }

  /**
   * Who holds which role, for an owner or an administrator of the resource's
   * organization (`administrator`: the request vouches that the principal is
   * one), as SpiceDB's `inspect` permission decides; read-only.
   */
  async inspect(principal: Principal, resource: ResourceRef, administrator: boolean): Promise<Grant[]> {
    const response = await this.spicedb.checkPermission(
      built(v1.CheckPermissionRequest, {
        consistency: consistencyAfter(await this.lastWrite(tokenKey(principal.org, resource))),
        resource: objectRef(principal.org, resource),
        permission: "inspect",
        subject: userRef(scopedId(principal.org, principal.user)),
        context: administratorContext(principal.org, administrator),
      }),
    );
    if (response.permissionship !== v1.CheckPermissionResponse_Permissionship.HAS_PERMISSION)
      throw new NotInspector();
    return this.listGrants(principal.org, resource);
  }

  /** Who holds which role on an organization's resource, for operators (no ownership asked). */
  async listGrants(org: string, resource: ResourceRef): Promise<Grant[]> {
    const relationships = await this.spicedb.readRelationships(
      built(v1.ReadRelationshipsRequest, {
        consistency: await this.consistency(tokenKey(org, resource)),
        relationshipFilter: resourceFilter(org, resource),
      }),
    );
    const grants: Grant[] = [];
    for (const { relationship } of relationships) {
      const objectId = relationship?.subject?.object?.objectId;
      // Roles only: the resource's `organization` is no grant.
      if (!relationship || !objectId || !(ROLES as readonly string[]).includes(relationship.relation))
        continue;
      const { org: scopedOrg, id } = unscopedId(objectId);
      grants.push({
        // A subject of another organization was not written by this gateway; it is shown as SpiceDB has it.
        userId: objectId === PUBLIC_USER ? PUBLIC_USER : scopedOrg === org ? id : objectId,
        role: relationship.relation as Role,
        ...(relationship.optionalExpiresAt
          ? { expiresAt: fromTimestamp(relationship.optionalExpiresAt) }
          : {}),
      });
    }
    return grants.sort((a, b) => ROLE_ORDER[a.role] - ROLE_ORDER[b.role] || byCodeUnits(a.userId, b.userId));
  }

  /**
   * Sets the user's one role on the resource, replacing any other, in one
   * atomic write. On a resource whose owners expire (its content does), the
   * grant ends then too, whatever `expiresAt` asked: no grant outlives its content.
   */
  async grant(principal: Principal, change: RoleChange): Promise<string | undefined> {
    await this.assertOwner(principal, change);
    await this.hooks.afterCheck?.("grant", principal, change);
    const until = await this.contentExpiry(principal.org, change);
    if (until && (!change.expiresAt || change.expiresAt > until)) change = { ...change, expiresAt: until };
    const subject = subjectId(principal.org, change.userId);
    // The schema admits `user:*` on writer and reader only; it can hold no owner role to delete.
    const roles = change.userId === PUBLIC_USER ? ROLES.filter((role) => role !== "owner") : ROLES;
    const updates = roles.map((role) =>
      role === change.role
        ? update(
            v1.RelationshipUpdate_Operation.TOUCH,
            principal.org,
            change,
            role,
            subject,
            change.expiresAt,
          )
        : update(v1.RelationshipUpdate_Operation.DELETE, principal.org, change, role, subject),
    );
    const demotesOwner = change.role !== "owner" && change.userId !== PUBLIC_USER;
    const other = demotesOwner ? await this.anotherOwner(principal, change, subject) : undefined;
    await this.hooks.beforeWrite?.("grant", principal, change);
    return this.ownerWrite(principal, change, updates, other);
  }

  /** Removes the role when the user holds it; succeeds either way. */
  async revoke(principal: Principal, change: RoleChange): Promise<string | undefined> {
    await this.assertOwner(principal, change);
    await this.hooks.afterCheck?.("revoke", principal, change);
    const subject = subjectId(principal.org, change.userId);
    const removesOwner = change.role === "owner" && change.userId !== PUBLIC_USER;
    const other = removesOwner ? await this.anotherOwner(principal, change, subject) : undefined;
    await this.hooks.beforeWrite?.("revoke", principal, change);
    return this.ownerWrite(
      principal,
      change,
      [update(v1.RelationshipUpdate_Operation.DELETE, principal.org, change, change.role, subject)],
      other,
    );
  }

  /**
   * When the resource's content expires, as its owner relationships say: the
   * latest of their expirations; `undefined` if any owner never expires
   * (resources of other backends, conversations, content created before
   * owners expired).
   */
  private async contentExpiry(org: string, resource: ResourceRef): Promise<Date | undefined> {
    // Only stored responses, completions and files expire; the gateway, which grants, reads when from the owners.
    if (!CONTENT_EXPIRES.has(resource.type)) return undefined;
    const owners = await this.spicedb.readRelationships(
      built(v1.ReadRelationshipsRequest, {
        consistency: FULLY_CONSISTENT,
        relationshipFilter: ownerFilter(org, resource),
      }),
    );
    let latest: Date | undefined;
    for (const { relationship } of owners) {
      if (!relationship?.optionalExpiresAt) return undefined;
      const at = fromTimestamp(relationship.optionalExpiresAt);
      if (!latest || at > latest) latest = at;
    }
    return latest;
  }

  private async assertOwner(principal: Principal, resource: ResourceRef, what?: string): Promise<void> {
    if (!(await this.check(principal, resource, "owner"))) throw new NotResourceOwner(what);
  }

  /**
   * When `subject` is an owner about to lose that role, another owner must
   * exist, and stay an owner until the write lands: the write carries a
   * precondition on that other owner, so two owners demoting each other at
   * once cannot leave the resource ownerless. `undefined` when `subject` is
   * not an owner (nothing to protect). A caller who is no longer an owner by
   * now (another owner demoted them since their check) gets the 403 a landed
   * demotion gives, never the 409 of the last owner: one answer to two owners
   * demoting each other, whichever step the second one reached.
   */
  private async anotherOwner(
    principal: Principal,
    resource: ResourceRef,
    subject: string,
  ): Promise<v1.Precondition | undefined> {
    const { org } = principal;
    const owners = await this.spicedb.readRelationships(
      built(v1.ReadRelationshipsRequest, {
        consistency: FULLY_CONSISTENT,
        relationshipFilter: ownerFilter(org, resource),
      }),
    );
    const ids = owners.map((o) => o.relationship?.subject?.object?.objectId);
    if (!ids.includes(scopedId(org, principal.user))) throw new NotResourceOwner();
    if (!ids.includes(subject)) return undefined;
    const other = ids.find((id) => id !== subject);
    if (!other) throw new LastOwner();
    return built(v1.Precondition, {
      operation: v1.Precondition_Operation.MUST_MATCH,
      filter: ownerFilter(org, resource, other),
    });
  }

  /** A role change by an owner: it lands only if the caller (and `other`, when given) still own the resource. */
  private ownerWrite(
    principal: Principal,
    resource: ResourceRef,
    updates: v1.RelationshipUpdate[],
    other?: v1.Precondition,
  ): Promise<string | undefined> {
    const preconditions = [callerIsOwner(principal, resource), ...(other ? [other] : [])];
    return this.guarded(principal, resource, () =>
      this.write(principal.org, resource, updates, preconditions),
    );
  }

  /**
   * Runs a write guarded by ownership preconditions. When one fails, SpiceDB
   * does not say which: if the caller is no longer an owner, that is the
   * answer (403); otherwise the other owner relied on is gone (409).
   */
  private async guarded<T>(principal: Principal, resource: ResourceRef, write: () => Promise<T>): Promise<T> {
    try {
      return await write();
    } catch (err) {
      if (!isFailedPrecondition(err)) throw err;
      const owners = await this.spicedb.readRelationships(
        built(v1.ReadRelationshipsRequest, {
          consistency: FULLY_CONSISTENT,
          relationshipFilter: ownerFilter(principal.org, resource, scopedId(principal.org, principal.user)),
        }),
      );
      throw owners.length === 0 ? new NotResourceOwner() : new LastOwner();
    }
  }

  /** One atomic write; its token is kept for the resource and for its organization's lookups. */
  private async write(
    org: string,
    resource: ResourceRef,
    updates: v1.RelationshipUpdate[],
    preconditions: v1.Precondition[] = [],
    options: { unseen?: boolean } = {},
  ): Promise<string | undefined> {
    // When grants this write makes end, recorded before it lands: no check sees a grant whose end is
    // unknown. A resource no one can have asked about yet (`unseen`: a fresh id, not yet answered to
    // anyone) has both written at once, and the write is done once both are.
    const expiries = updates.flatMap(({ relationship }) =>
      relationship?.optionalExpiresAt ? [fromTimestamp(relationship.optionalExpiresAt).getTime()] : [],
    );
    const recorded =
      expiries.length > 0 ? this.expiries?.record(tokenKey(org, resource), expiries) : undefined;
    if (!options.unseen) await recorded;
    const [written, ended] = await Promise.allSettled([
      this.spicedb.writeRelationships(
        built(v1.WriteRelationshipsRequest, { updates, optionalPreconditions: preconditions }),
      ),
      recorded,
    ]);
    if (ended.status === "rejected") {
      // Not kept: a grant whose end is unknown must not stay (best effort: no one knows the id yet).
      if (written.status === "fulfilled")
        await this.spicedb
          .deleteRelationships(
            built(v1.DeleteRelationshipsRequest, { relationshipFilter: resourceFilter(org, resource) }),
          )
          .catch(() => undefined);
      throw ended.reason;
    }
    if (written.status === "rejected") throw written.reason;
    const response = written.value;
    const token = response.writtenAt?.token;
    if (token) {
      await this.keep(
        "could not keep the ZedToken of a write; checks may lag briefly",
        ...setTogether(this.tokens, () => [
          this.tokens.set(tokenKey(org, resource), token),
          this.tokens.set(organizationTokenKey(org), token),
        ]),
      );
    }
    return token;
  }

  /**
   * The write has landed whatever happens here; if its token cannot be kept,
   * checks elsewhere may briefly not see it, which is logged rather than
   * reported as a failed write.
   */
  private async keep(warning: string, ...writes: Promise<void>[]): Promise<void> {
    for (const result of await Promise.allSettled(writes)) {
      if (result.status === "rejected") {
        this.logger?.warn({ err: (result.reason as Error).message }, warning);
        return;
      }
    }
  }

  /** The consistency a read of `key`'s resource (or organization) asks for: see `consistencyAfter`. */
  private async consistency(key: string): Promise<v1.Consistency> {
    return consistencyAfter(await this.lastWrite(key));
  }

  /** The last write under `key`; `UNKNOWN_LAST_WRITE` when Redis cannot say. */
  private lastWrite(key: string): Promise<LastWriteRead> {
    // Reads of one key asked in the same run of this process, before any I/O was heard (a proxied MCP
    // call's server and tool checks, asked together), share one round trip: nothing written
    // meanwhile can have been seen by anyone.
    const shared = this.sameRunReads.get(key);
    if (shared) return shared;
    const read = this.tokens.get(key).catch((): LastWriteRead => UNKNOWN_LAST_WRITE);
    if (this.sameRunReads.size === 0) queueMicrotask(() => this.sameRunReads.clear());
    this.sameRunReads.set(key, read);
    return read;
  }
}

/**
 * At least as fresh as the last write. Right after a write (while Redis
 * says the write is recent), fully consistent instead: two writes to one
 * resource at once may record their tokens in either order, and the older
 * token must not hide the newer write; once SpiceDB's snapshot window has
 * passed, either token sees both. Fully consistent too when the last write
 * cannot be known; the cheapest when nothing was written through here.
 */
export function consistencyAfter(last: LastWriteRead): v1.Consistency {
  if (last === UNKNOWN_LAST_WRITE || last?.recent) return FULLY_CONSISTENT;
  if (!last?.token) return MINIMIZE_LATENCY;
  return built(v1.Consistency, {
    requirement: { oneofKind: "atLeastAsFresh", atLeastAsFresh: built(v1.ZedToken, { token: last.token }) },
  });
}

/** The order of lookups: plain UTF-16 code units, the same on every replica whatever its locale. */
const byCodeUnits = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

/** The principal's own owner relationship on a resource, until `expiresAt` when given. */
function ownerUpdate(principal: Principal, resource: ResourceRef, expiresAt?: Date): v1.RelationshipUpdate {
  return update(
    v1.RelationshipUpdate_Operation.TOUCH,
    principal.org,
    resource,
    "owner",
    scopedId(principal.org, principal.user),
    expiresAt,
  );
}
