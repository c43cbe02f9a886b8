/**
 * The SpiceDB messages the authorization model is made of: object and
 * subject references scoped by organization, owner filters, and relationship
 * updates as `spicedb/schema.zed` admits them.
 */
import type { Principal } from "../principal.ts";
import { PUBLIC_USER, type ResourceType, type Role, scopedId } from "./identity.ts";
import { v1 } from "./spicedb-client.ts";

/**
 * A message of `type` holding `fields` as given. protobuf-ts's `create(value)`
 * copies every nested message it is handed, level by level, so building a
 * write out of messages made by `create` copied each inner one once per level
 * above it (a Struct's fields, message by message): a tenth of a stored
 * response's CPU in the service. Messages here are built fresh and never
 * changed once built, so sharing them is safe.
 */
export function built<T extends object>(type: { create(): T }, fields: Partial<T>): T {
  const message = type.create();
  // A field given as undefined keeps its default, as `create` does.
  for (const name in fields) if (fields[name] !== undefined) message[name] = fields[name] as T[typeof name];
  return message;
}

export interface ResourceRef {
  type: ResourceType;
  id: string;
}

/** The caveat that keeps `user:*` inside its organization (`spicedb/schema.zed`). */
export const SAME_ORGANIZATION_CAVEAT = "same_organization";

/** The caveat of an organization's administrators (`spicedb/schema.zed`). */
export const ORGANIZATION_ADMINISTRATOR_CAVEAT = "organization_administrator";

/**
 * What an `inspect` check tells SpiceDB: the subject's organization and
 * whether the request vouches that the subject administers it.
 */
export function administratorContext(org: string, administrator: boolean): v1.PbStruct {
  return v1.PbStruct.fromJson({ subject_organization: org, administrator });
}

export const organizationRef = (org: string) =>
  built(v1.ObjectReference, { objectType: "organization", objectId: org });

/**
 * Written with a resource's first owner: the resource names its organization,
 * and the organization's administrators are its users when a request vouches
 * for them (the same relationship for every resource: a TOUCH).
 */
export function organizationUpdates(org: string, resource: ResourceRef): v1.RelationshipUpdate[] {
  const { TOUCH } = v1.RelationshipUpdate_Operation;
  return [
    built(v1.RelationshipUpdate, {
      operation: TOUCH,
      relationship: built(v1.Relationship, {
        resource: objectRef(org, resource),
        relation: "organization",
        subject: built(v1.SubjectReference, { object: organizationRef(org) }),
      }),
    }),
    built(v1.RelationshipUpdate, {
      operation: TOUCH,
      relationship: built(v1.Relationship, {
        resource: organizationRef(org),
        relation: "administrator",
        subject: userRef(PUBLIC_USER),
        optionalCaveat: built(v1.ContextualizedCaveat, {
          caveatName: ORGANIZATION_ADMINISTRATOR_CAVEAT,
          context: v1.PbStruct.fromJson({ organization: org }),
        }),
      }),
    }),
  ];
}

/** What a check or lookup must tell SpiceDB for the public wildcard to apply: the subject's organization. */
export function subjectContext(org: string): v1.PbStruct {
  return v1.PbStruct.fromJson({ subject_organization: org });
}

export const FULLY_CONSISTENT = built(v1.Consistency, {
  requirement: { oneofKind: "fullyConsistent", fullyConsistent: true },
});
export const MINIMIZE_LATENCY = built(v1.Consistency, {
  requirement: { oneofKind: "minimizeLatency", minimizeLatency: true },
});

export const objectRef = (org: string, resource: ResourceRef) =>
  built(v1.ObjectReference, { objectType: resource.type, objectId: scopedId(org, resource.id) });

export const userRef = (objectId: string) =>
  built(v1.SubjectReference, { object: built(v1.ObjectReference, { objectType: "user", objectId }) });

/** Every relationship of a resource. */
export function resourceFilter(org: string, resource: ResourceRef): v1.RelationshipFilter {
  return built(v1.RelationshipFilter, {
    resourceType: resource.type,
    optionalResourceId: scopedId(org, resource.id),
  });
}

/** Owner relationships of a resource, or one owner's. */
export function ownerFilter(org: string, resource: ResourceRef, ownerId?: string): v1.RelationshipFilter {
  return built(v1.RelationshipFilter, {
    ...resourceFilter(org, resource),
    optionalRelation: "owner",
    ...(ownerId
      ? {
          optionalSubjectFilter: built(v1.SubjectFilter, { subjectType: "user", optionalSubjectId: ownerId }),
        }
      : {}),
  });
}

/** The guard of every owner-only write: the caller still owns the resource when it lands. */
export function callerIsOwner(principal: Principal, resource: ResourceRef): v1.Precondition {
  return built(v1.Precondition, {
    operation: v1.Precondition_Operation.MUST_MATCH,
    filter: ownerFilter(principal.org, resource, scopedId(principal.org, principal.user)),
  });
}

/**
 * A relationship change. `user:*` is written with its organization's caveat,
 * the only way the schema admits it; `expiresAt` becomes SpiceDB's
 * relationship expiration.
 */
export function update(
  operation: v1.RelationshipUpdate_Operation,
  org: string,
  resource: ResourceRef,
  role: Role,
  subject: string,
  expiresAt?: Date,
): v1.RelationshipUpdate {
  return built(v1.RelationshipUpdate, {
    operation,
    relationship: built(v1.Relationship, {
      resource: objectRef(org, resource),
      relation: role,
      subject: userRef(subject),
      ...(subject === PUBLIC_USER
        ? {
            optionalCaveat: built(v1.ContextualizedCaveat, {
              caveatName: SAME_ORGANIZATION_CAVEAT,
              context: v1.PbStruct.fromJson({ resource_organization: org }),
            }),
          }
        : {}),
      ...(expiresAt ? { optionalExpiresAt: toTimestamp(expiresAt) } : {}),
    }),
  });
}

export function toTimestamp(date: Date): { seconds: string; nanos: number } {
  const ms = date.getTime();
  return { seconds: String(Math.floor(ms / 1000)), nanos: (ms % 1000) * 1_000_000 };
}

export function fromTimestamp(timestamp: { seconds: string; nanos: number }): Date {
  return new Date(Number(timestamp.seconds) * 1000 + Math.floor(timestamp.nanos / 1_000_000));
}

/** The Redis key of a resource's last-write token; an organization's lookups use `organization:<org>`. */
export const tokenKey = (org: string, resource: ResourceRef) =>
  `${resource.type}:${scopedId(org, resource.id)}`;
export const organizationTokenKey = (org: string) => `organization:${org}`;
