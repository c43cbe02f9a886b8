import { AppError } from "../errors.ts";
import type { Logger } from "../logger.ts";
import type { Principal } from "../principal.ts";
import { type ConsistencyTokens, recordDeletion } from "./consistency-tokens.ts";
import { PUBLIC_USER, scopedId } from "./identity.ts";
import {
  FULLY_CONSISTENT,
  organizationTokenKey,
  type ResourceRef,
  resourceFilter,
  tokenKey,
} from "./relationships.ts";
import { isFailedPrecondition, type SpiceDBClient, v1 } from "./spicedb-client.ts";

/** The caller may not delete this resource: it does not own it or write it (any more). */
export class NotWriter extends AppError {
  constructor() {
    super("forbidden", "Deleting this resource needs the 'writer' role", { reason: "not_writer" });
    this.name = "NotWriter";
  }
}

/** A seam a test injects (production passes none); read at each call. */
export interface WriterDeletionHooks {
  /** Awaited after the grant is found, before the guarded delete. */
  beforeWrite?: (principal: Principal, resource: ResourceRef) => Promise<void>;
}

/**
 * Deletes a resource's relationships for a principal who may write it: an
 * owner, a writer, or any user of the organization when `*` is a writer.
 * `ResourceAuthorization.deleteResource` is for owners only; records such as
 * stored responses may be deleted by their writers too.
 */
export class WriterDeletion {
  private readonly spicedb: SpiceDBClient;
  private readonly tokens: ConsistencyTokens;
  private readonly logger: Logger | undefined;
  private readonly hooks: WriterDeletionHooks;

  constructor(
    spicedb: SpiceDBClient,
    tokens: ConsistencyTokens,
    logger?: Logger,
    hooks: WriterDeletionHooks = {},
  ) {
    this.spicedb = spicedb;
    this.tokens = tokens;
    this.logger = logger;
    this.hooks = hooks;
  }

  /**
   * Removes every relationship of the resource. The delete carries a
   * precondition on the very relationship that lets the principal write it,
   * so a principal demoted or revoked meanwhile gets `NotWriter` and nothing
   * is deleted (docs/adr/0009-check-and-write-together.md).
   */
  async delete(principal: Principal, resource: ResourceRef): Promise<void> {
    const grant = await this.writeGrant(principal, resource);
    if (!grant) throw new NotWriter();
    await this.hooks.beforeWrite?.(principal, resource);
    let response: v1.DeleteRelationshipsResponse;
    try {
      response = await this.spicedb.deleteRelationships(
        v1.DeleteRelationshipsRequest.create({
          relationshipFilter: resourceFilter(principal.org, resource),
          optionalPreconditions: [
            v1.Precondition.create({ operation: v1.Precondition_Operation.MUST_MATCH, filter: grant }),
          ],
        }),
      );
    } catch (err) {
      if (isFailedPrecondition(err)) throw new NotWriter();
      throw err;
    }
    const failed = await recordDeletion(
      this.tokens,
      { resource: tokenKey(principal.org, resource), organization: organizationTokenKey(principal.org) },
      response.deletedAt?.token,
    );
    if (failed)
      this.logger?.warn(
        { err: failed.message },
        "could not keep the ZedToken of a delete; checks may lag briefly",
      );
  }

  /**
   * A filter matching the relationship that gives the principal write access,
   * the strongest first: its own owner or writer relationship, else a public
   * writer. `undefined` when there is none (expired grants are gone already).
   */
  private async writeGrant(
    principal: Principal,
    resource: ResourceRef,
  ): Promise<v1.RelationshipFilter | undefined> {
    const self = scopedId(principal.org, principal.user);
    const found = await this.spicedb.readRelationships(
      v1.ReadRelationshipsRequest.create({
        consistency: FULLY_CONSISTENT,
        relationshipFilter: resourceFilter(principal.org, resource),
      }),
    );
    const holds = (relation: string, subject: string) =>
      found.some(
        ({ relationship }) =>
          relationship?.relation === relation && relationship.subject?.object?.objectId === subject,
      );
    const candidates: [string, string][] = [
      ["owner", self],
      ["writer", self],
      ["writer", PUBLIC_USER],
    ];
    const match = candidates.find(([relation, subject]) => holds(relation, subject));
    if (!match) return undefined;
    return v1.RelationshipFilter.create({
      ...resourceFilter(principal.org, resource),
      optionalRelation: match[0],
      optionalSubjectFilter: v1.SubjectFilter.create({ subjectType: "user", optionalSubjectId: match[1] }),
    });
  }
}
