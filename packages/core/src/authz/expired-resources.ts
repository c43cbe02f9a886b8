import { type ConsistencyTokens, recordDeletion } from "./consistency-tokens.ts";
import { scopedId } from "./identity.ts";
import {
  FULLY_CONSISTENT,
  organizationTokenKey,
  type ResourceRef,
  resourceFilter,
  tokenKey,
} from "./relationships.ts";
import { type SpiceDBClient, v1 } from "./spicedb-client.ts";

/**
 * Removes every relationship of a resource whose content expired, with no
 * caller to check (the retention sweeper's delete), so relationships stay
 * proportional to live content, and records the delete as the resource's
 * last write (`recordDeletion`: decisions kept before it no longer match; the
 * token expires by itself within a day). Idempotent: a resource with none
 * left deletes nothing. A failure to record the token is returned for the
 * caller to log, not thrown.
 */
export async function deleteExpiredResource(
  spicedb: SpiceDBClient,
  tokens: ConsistencyTokens,
  org: string,
  resource: ResourceRef,
): Promise<Error | undefined> {
  const response = await spicedb.deleteRelationships(
    v1.DeleteRelationshipsRequest.create({ relationshipFilter: resourceFilter(org, resource) }),
  );
  return recordDeletion(
    tokens,
    { resource: tokenKey(org, resource), organization: organizationTokenKey(org) },
    response.deletedAt?.token,
  );
}

/**
 * Most relationship updates in one WriteRelationships: SpiceDB's default
 * `--write-relationships-max-updates-per-call`.
 */
export const MAX_UPDATES_PER_WRITE = 1000;
/** Reads of a batch's relationships in flight at once (reads run side by side in SpiceDB; writes do not). */
const READ_CONCURRENCY = 16;
/** Tokens of swept resources dropped at once. */
const DROPS_AT_ONCE = 500;
/** Relationships per page when a whole resource type is read (`readWholeType`): SpiceDB's default `--max-read-relationships-limit`. */
const WHOLE_TYPE_PAGE = 1_000;

/** One expired resource of an organization. */
export interface ExpiredResource {
  org: string;
  resource: ResourceRef;
}

/**
 * Removes every relationship of many expired resources at once (the
 * retention sweep): their relationships read side by side, then deleted by
 * as few WriteRelationships as `MAX_UPDATES_PER_WRITE` allows, one SpiceDB
 * transaction each instead of one per resource. Nothing is written for the
 * deleted resources: their ZedTokens are dropped from Redis (nothing recent
 * written), so the delete leaves no key behind; each
 * organization's token becomes the last write's (lookups right after see the
 * delete). A decision the gateway kept for such a resource before any token
 * was written ("" in the decision cache) can be served until its maximum
 * age, the staleness a check already allows, about content that is no longer
 * served anyway. A grant written to a resource between its read and the
 * write is left, as it would be after a per-resource delete; relationships
 * without content are the reconciler's. Returns the relationships deleted,
 * and the first failure to drop tokens (logged by the caller, not thrown:
 * the relationships are gone).
 *
 * `readWholeType` (all `resources` then of that type): instead of one read
 * per resource, the type's relationships are read once, a page at a time,
 * and those of `resources` kept. For the local SpiceDB engine, whose
 * in-memory datastore answers a read of one resource by scanning every
 * relationship of its type: one scan per page instead of one per resource.
 */
export async function deleteExpiredResources(
  spicedb: SpiceDBClient,
  tokens: ConsistencyTokens,
  resources: ExpiredResource[],
  readWholeType?: ResourceRef["type"],
): Promise<{ relationships: number; tokenFailure?: Error }> {
  const found = readWholeType
    ? await relationshipsOfType(spicedb, readWholeType, resources)
    : await relationshipsOneByOne(spicedb, resources);
  const updates = found.map((relationship) =>
    v1.RelationshipUpdate.create({ operation: v1.RelationshipUpdate_Operation.DELETE, relationship }),
  );
  let token: string | undefined;
  for (let start = 0; start < updates.length; start += MAX_UPDATES_PER_WRITE) {
    const written = await spicedb.writeRelationships(
      v1.WriteRelationshipsRequest.create({ updates: updates.slice(start, start + MAX_UPDATES_PER_WRITE) }),
    );
    token = written.writtenAt?.token ?? token;
  }
  const orgs = [...new Set(resources.map((r) => r.org))];
  let failed: PromiseRejectedResult | undefined;
  // A batch at a time: tens of thousands of commands sent at once would outlast the client's command timeout.
  for (let start = 0; start < resources.length && !failed; start += DROPS_AT_ONCE) {
    const results = await Promise.allSettled(
      resources
        .slice(start, start + DROPS_AT_ONCE)
        .map(({ org, resource }) => tokens.drop(tokenKey(org, resource))),
    );
    failed = results.find((r) => r.status === "rejected");
  }
  if (token) {
    const results = await Promise.allSettled(orgs.map((org) => tokens.set(organizationTokenKey(org), token)));
    failed ??= results.find((r) => r.status === "rejected");
  }
  return {
    relationships: updates.length,
    ...(failed ? { tokenFailure: failed.reason as Error } : {}),
  };
}

/** Each resource's relationships, read side by side (`READ_CONCURRENCY`). */
async function relationshipsOneByOne(
  spicedb: SpiceDBClient,
  resources: ExpiredResource[],
): Promise<v1.Relationship[]> {
  const found: v1.Relationship[][] = new Array(resources.length);
  let next = 0;
  const reader = async () => {
    while (next < resources.length) {
      const index = next++;
      const { org, resource } = resources[index]!;
      const read = await spicedb.readRelationships(
        v1.ReadRelationshipsRequest.create({
          relationshipFilter: resourceFilter(org, resource),
          consistency: FULLY_CONSISTENT,
        }),
      );
      found[index] = read.flatMap((r) => (r.relationship ? [r.relationship] : []));
    }
  };
  await Promise.all(Array.from({ length: Math.min(READ_CONCURRENCY, resources.length) }, reader));
  return found.flat();
}

/** Every relationship of `type` whose resource is one of `resources`, the type read a page at a time. */
async function relationshipsOfType(
  spicedb: SpiceDBClient,
  type: ResourceRef["type"],
  resources: ExpiredResource[],
): Promise<v1.Relationship[]> {
  const wanted = new Set(
    resources.map(({ org, resource }) => {
      if (resource.type !== type) throw new Error(`expected resources of type ${type}, got ${resource.type}`);
      return scopedId(org, resource.id);
    }),
  );
  const found: v1.Relationship[] = [];
  let cursor: v1.Cursor | undefined;
  while (true) {
    const page = await spicedb.readRelationships(
      v1.ReadRelationshipsRequest.create({
        relationshipFilter: v1.RelationshipFilter.create({ resourceType: type }),
        consistency: FULLY_CONSISTENT,
        optionalLimit: WHOLE_TYPE_PAGE,
        ...(cursor ? { optionalCursor: cursor } : {}),
      }),
    );
    for (const { relationship } of page)
      if (relationship && wanted.has(relationship.resource?.objectId ?? "")) found.push(relationship);
    cursor = page.at(-1)?.afterResultCursor;
    if (page.length < WHOLE_TYPE_PAGE || !cursor) return found;
  }
}
