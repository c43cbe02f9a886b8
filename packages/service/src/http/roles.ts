import type { ResourceAuthorization, ResourceType, Role } from "@gw/core/authz";
import type { Principal } from "@gw/core/principal";
import { requireRole } from "../access.ts";

/**
 * A route's `authorize` step: the principal's `role` on the resource of
 * `type` the path names (its `param`, `id` by default), asked of SpiceDB
 * before the request's parts are validated (see `requireRole`).
 */
export const roleOn =
  (type: ResourceType, role: Role, param = "id") =>
  (
    input: { principal: Principal; params: Record<string, string> },
    deps: { authorization: ResourceAuthorization },
  ): Promise<void> =>
    requireRole(deps.authorization, input.principal, { type, id: String(input.params[param]) }, role);
