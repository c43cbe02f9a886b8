import type { ResourceAuthorization, ResourceType, Role } from "@gw/core/authz";
import { forbidden, notFound } from "@gw/core/errors";
import type { Principal } from "@gw/core/principal";

/** Longer than any id the service issues, and than SpiceDB takes once encoded: such a resource cannot exist. */
const MAX_RESOURCE_ID_LENGTH = 256;

/**
 * Resource-level access: without read access a resource is reported missing
 * (404, so existence does not leak); with read access but not the needed
 * role, 403.
 */
export async function requireRole(
  authorization: ResourceAuthorization,
  principal: Principal,
  resource: { type: ResourceType; id: string },
  role: Role,
): Promise<void> {
  const label = resource.type === "conversation" ? "conversation" : resource.type;
  if (resource.id.length > MAX_RESOURCE_ID_LENGTH) throw notFound(`No ${label} with an id that long`);
  if (!(await authorization.check(principal, resource, "reader")))
    throw notFound(`No ${label} ${resource.id}`);
  if (role !== "reader" && !(await authorization.check(principal, resource, role))) {
    throw forbidden(`This ${label} needs the '${role}' role`);
  }
}
