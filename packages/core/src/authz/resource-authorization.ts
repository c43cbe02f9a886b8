import { AppError } from "../errors.ts";
import type { Logger } from "../logger.ts";
import type { Principal } from "../principal.ts";
import type { ConsistencyTokens, LastWrite } from "./consistency-tokens.ts";
import {
  PERMISSION_FOR_ROLE,
  PUBLIC_USER,
  type ResourceType,
  ROLES,
  type Role,
  scopedId,
  subjectId,
} from "./identity.ts";
import { isFailedPrecondition, type SpiceDBClient, v1 } from "./spicedb-client.ts";

/** The caller may not change roles on this resource (also when it does not exist, so existence does not leak). */
export class NotResourceOwner extends AppError {
  constructor() {
    super("forbidden", "Only resource owners can grant or revoke permissions");
    this.name = "NotResourceOwner";
  }
}

/** The change would leave the resource without an owner. */
export class LastOwner extends AppError {
  constructor() {
    super("conflict", "The last owner of a resource cannot be removed or demoted");
    this.name = "LastOwner";
  }
}

export interface ResourceRef {
  type: ResourceType;
  id: string;
}

export interface RoleChange extends ResourceRef {
  /** A user of the principal's organization, or `*` for all of them (never with `owner`). */
  userId: string;
  role: Role;
}

const objectRef = (org: string, resource: ResourceRef) =>
  v1.ObjectReference.create({ objectType: resource.type, objectId: scopedId(org, resource.id) });

const userRef = (objectId: string) =>
  v1.SubjectReference.create({ object: v1.ObjectReference.create({ objectType: "user", objectId }) });

/** The caveat that keeps `user:*` inside its organization (`spicedb/schema.zed`). */
export const SAME_ORGANIZATION_CAVEAT = "same_organization";

/** What a check or lookup must tell SpiceDB for the public wildcard to apply: the subject's organization. */
export function subjectContext(org: string): v1.PbStruct {
  return v1.PbStruct.fromJson({ subject_organization: org });
}

/** Runs between a role check and the write it guards; tests use it to force interleavings. */
export type BeforeWriteHook = (
  operation: "grant" | "revoke" | "delete",
  principal: Principal,
  resource: ResourceRef,
) => Promise<void>;

/**
 * Per-resource roles on SpiceDB. Resources and users are always those of the
 * principal's organization: ids are composed here, from the principal, never
 * taken whole from the caller.
 *
 * Every owner-only write carries a precondition that the caller is still an
 * owner when it lands (DESIGN.md decision 9): the check before it only
 * chooses the answer, the precondition decides.
 */
export class ResourceAuthorization {
  private readonly spicedb: SpiceDBClient;
  private readonly tokens: ConsistencyTokens;
  private readonly logger: Logger | undefined;
  /** Test seam: awaited after the ownership check, before the guarded write. */
  beforeWrite: BeforeWriteHook | undefined;

  constructor(spicedb: SpiceDBClient, tokens: ConsistencyTokens, logger?: Logger) {
    this.spicedb = spicedb;
    this.tokens = tokens;
    this.logger = logger;
  }

  /** Makes the principal the owner of a resource it just created. Throws if that cannot be written. */
  async createOwnership(principal: Principal, resource: ResourceRef): Promise<void> {
    await this.write(principal.org, resource, [
      update(
        v1.RelationshipUpdate_Operation.TOUCH,
        principal.org,
        resource,
        "owner",
        scopedId(principal.org, principal.user),
      ),
    ]);
  }

  /** Removes every relationship of a resource, if the principal still owns it when the delete lands. */
  async deleteResource(principal: Principal, resource: ResourceRef): Promise<void> {
    await this.assertOwner(principal, resource);
    await this.beforeWrite?.("delete", principal, resource);
    const response = await this.guarded(principal, resource, () =>
      this.spicedb.deleteRelationships(
        v1.DeleteRelationshipsRequest.create({
          relationshipFilter: v1.RelationshipFilter.create({
            resourceType: resource.type,
            optionalResourceId: scopedId(principal.org, resource.id),
          }),
          optionalPreconditions: [callerIsOwner(principal, resource)],
        }),
      ),
    );
    if (response.deletedAt?.token) await this.remember(principal.org, resource, response.deletedAt.token);
  }

  /** Whether the principal holds `role` on the resource, directly, through a higher role, or publicly. */
  async check(principal: Principal, resource: ResourceRef, role: Role): Promise<boolean> {
    const response = await this.spicedb.checkPermission(
      v1.CheckPermissionRequest.create({
        consistency: await this.consistency(principal.org, resource),
        resource: objectRef(principal.org, resource),
        permission: PERMISSION_FOR_ROLE[role],
        subject: userRef(scopedId(principal.org, principal.user)),
        context: subjectContext(principal.org),
      }),
    );
    return response.permissionship === v1.CheckPermissionResponse_Permissionship.HAS_PERMISSION;
  }

  /** Sets the user's one role on the resource, replacing any other, in one atomic write. */
  async grant(principal: Principal, change: RoleChange): Promise<void> {
    await this.assertOwner(principal, change);
    const subject = subjectId(principal.org, change.userId);
    // The schema admits `user:*` on writer and reader only; it can hold no owner role to delete.
    const roles = change.userId === PUBLIC_USER ? ROLES.filter((role) => role !== "owner") : ROLES;
    const updates = roles.map((role) =>
      update(
        role === change.role ? v1.RelationshipUpdate_Operation.TOUCH : v1.RelationshipUpdate_Operation.DELETE,
        principal.org,
        change,
        role,
        subject,
      ),
    );
    const demotesOwner = change.role !== "owner" && change.userId !== PUBLIC_USER;
    const other = demotesOwner ? await this.anotherOwner(principal.org, change, subject) : undefined;
    await this.beforeWrite?.("grant", principal, change);
    await this.ownerWrite(principal, change, updates, other);
  }

  /** Removes the role when the user holds it; succeeds either way. */
  async revoke(principal: Principal, change: RoleChange): Promise<void> {
    await this.assertOwner(principal, change);
    const subject = subjectId(principal.org, change.userId);
    const removesOwner = change.role === "owner" && change.userId !== PUBLIC_USER;
    const other = removesOwner ? await this.anotherOwner(principal.org, change, subject) : undefined;
    await this.beforeWrite?.("revoke", principal, change);
    await this.ownerWrite(
      principal,
      change,
      [update(v1.RelationshipUpdate_Operation.DELETE, principal.org, change, change.role, subject)],
      other,
    );
  }

  private async assertOwner(principal: Principal, resource: ResourceRef): Promise<void> {
    if (!(await this.check(principal, resource, "owner"))) throw new NotResourceOwner();
  }

  /**
   * When `subject` is an owner about to lose that role, another owner must
   * exist, and stay an owner until the write lands: the write carries a
   * precondition on that other owner, so two owners demoting each other at
   * once cannot leave the resource ownerless. `undefined` when `subject` is
   * not an owner (nothing to protect).
   */
  private async anotherOwner(
    org: string,
    resource: ResourceRef,
    subject: string,
  ): Promise<v1.Precondition | undefined> {
    const owners = await this.spicedb.readRelationships(
      v1.ReadRelationshipsRequest.create({
        consistency: FULLY_CONSISTENT,
        relationshipFilter: ownerFilter(org, resource),
      }),
    );
    const ids = owners.map((o) => o.relationship?.subject?.object?.objectId);
    if (!ids.includes(subject)) return undefined;
    const other = ids.find((id) => id !== subject);
    if (!other) throw new LastOwner();
    return v1.Precondition.create({
      operation: v1.Precondition_Operation.MUST_MATCH,
      filter: ownerFilter(org, resource, other),
    });
  }

  /** A role change by an owner: it lands only if the caller (and `other`, when given) still own the resource. */
  private async ownerWrite(
    principal: Principal,
    resource: ResourceRef,
    updates: v1.RelationshipUpdate[],
    other?: v1.Precondition,
  ): Promise<void> {
    const preconditions = [callerIsOwner(principal, resource), ...(other ? [other] : [])];
    const response = await this.guarded(principal, resource, () =>
      this.spicedb.writeRelationships(
        v1.WriteRelationshipsRequest.create({ updates, optionalPreconditions: preconditions }),
      ),
    );
    if (response.writtenAt?.token) await this.remember(principal.org, resource, response.writtenAt.token);
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
        v1.ReadRelationshipsRequest.create({
          consistency: FULLY_CONSISTENT,
          relationshipFilter: ownerFilter(principal.org, resource, scopedId(principal.org, principal.user)),
        }),
      );
      throw owners.length === 0 ? new NotResourceOwner() : new LastOwner();
    }
  }

  private async write(org: string, resource: ResourceRef, updates: v1.RelationshipUpdate[]): Promise<void> {
    const response = await this.spicedb.writeRelationships(v1.WriteRelationshipsRequest.create({ updates }));
    if (response.writtenAt?.token) await this.remember(org, resource, response.writtenAt.token);
  }

  /**
   * The write has landed whatever happens here; if its token cannot be kept,
   * checks elsewhere may briefly not see it, which is logged rather than
   * reported as a failed write.
   */
  private async remember(org: string, resource: ResourceRef, token: string): Promise<void> {
    try {
      await this.tokens.set(tokenKey(org, resource), token);
    } catch (err) {
      this.logger?.warn(
        { err: (err as Error).message },
        "could not keep the ZedToken of a write; checks may lag briefly",
      );
    }
  }

  /**
   * At least as fresh as the resource's last write. Right after a write
   * (while Redis keeps its "recent" marker), fully consistent instead: two
   * writes to one resource at once may record their tokens in either order,
   * and the older token must not hide the newer write; once SpiceDB's
   * snapshot window has passed, either token sees both. Fully consistent too
   * when the last write cannot be known.
   */
  private async consistency(org: string, resource: ResourceRef): Promise<v1.Consistency> {
    let last: LastWrite | undefined;
    try {
      last = await this.tokens.get(tokenKey(org, resource));
    } catch {
      return FULLY_CONSISTENT;
    }
    if (!last) return MINIMIZE_LATENCY;
    if (last.recent) return FULLY_CONSISTENT;
    return v1.Consistency.create({
      requirement: { oneofKind: "atLeastAsFresh", atLeastAsFresh: v1.ZedToken.create({ token: last.token }) },
    });
  }
}

const FULLY_CONSISTENT = v1.Consistency.create({
  requirement: { oneofKind: "fullyConsistent", fullyConsistent: true },
});
const MINIMIZE_LATENCY = v1.Consistency.create({
  requirement: { oneofKind: "minimizeLatency", minimizeLatency: true },
});

function tokenKey(org: string, resource: ResourceRef): string {
  return `${resource.type}:${scopedId(org, resource.id)}`;
}

/** Owner relationships of a resource, or one owner's. */
function ownerFilter(org: string, resource: ResourceRef, ownerId?: string): v1.RelationshipFilter {
  return v1.RelationshipFilter.create({
    resourceType: resource.type,
    optionalResourceId: scopedId(org, resource.id),
    optionalRelation: "owner",
    ...(ownerId
      ? {
          optionalSubjectFilter: v1.SubjectFilter.create({ subjectType: "user", optionalSubjectId: ownerId }),
        }
      : {}),
  });
}

/** The guard of every owner-only write: the caller still owns the resource when it lands. */
function callerIsOwner(principal: Principal, resource: ResourceRef): v1.Precondition {
  return v1.Precondition.create({
    operation: v1.Precondition_Operation.MUST_MATCH,
    filter: ownerFilter(principal.org, resource, scopedId(principal.org, principal.user)),
  });
}

/** A relationship change; `user:*` is written with its organization's caveat, the only way the schema admits it. */
function update(
  operation: v1.RelationshipUpdate_Operation,
  org: string,
  resource: ResourceRef,
  role: Role,
  subject: string,
): v1.RelationshipUpdate {
  return v1.RelationshipUpdate.create({
    operation,
    relationship: v1.Relationship.create({
      resource: objectRef(org, resource),
      relation: role,
      subject: userRef(subject),
      ...(subject === PUBLIC_USER
        ? {
            optionalCaveat: v1.ContextualizedCaveat.create({
              caveatName: SAME_ORGANIZATION_CAVEAT,
              context: v1.PbStruct.fromJson({ resource_organization: org }),
            }),
          }
        : {}),
    }),
  });
}
