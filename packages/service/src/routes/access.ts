import {
  forbidden,
  notFound,
  type Principal,
  type ResourceAuthorization,
  type ResourceType,
  type Role,
} from "@gw/core";

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
  if (!(await authorization.check(principal, resource, "reader")))
    throw notFound(`No ${label} ${resource.id}`);
  if (role !== "reader" && !(await authorization.check(principal, resource, role))) {
    throw forbidden(`This ${label} needs the '${role}' role`);
  }
}
