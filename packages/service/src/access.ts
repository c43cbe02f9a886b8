import { fitsObjectId, type ResourceAuthorization, type ResourceType, type Role } from "@gw/core/authz";
import { forbidden, notFound } from "@gw/core/errors";
import type { Principal } from "@gw/core/principal";

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
  // Longer once encoded than SpiceDB takes (`fitsObjectId`): no such resource can exist.
  if (!fitsObjectId(principal.org, resource.id)) throw notFound(`No ${label} with an id that long`);
  if (!(await authorization.check(principal, resource, "reader")))
    throw notFound(`No ${label} ${resource.id}`);
  if (role !== "reader" && !(await authorization.check(principal, resource, role))) {
    throw forbidden(`This ${label} needs the '${role}' role`);
  }
}
