import { type ConsistencyTokens, recordDeletion } from "./consistency-tokens.ts";
import { organizationTokenKey, type ResourceRef, resourceFilter, tokenKey } from "./relationships.ts";
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
