import { check } from "./check.ts";
import { deleteResource } from "./delete-resource.ts";
import { listGrants } from "./list-grants.ts";
import { listResources } from "./list-resources.ts";
import { registerResource } from "./register-resource.ts";
import { resourceAudit } from "./resource-audit.ts";
import { grant, revoke } from "./role-change.ts";

/** Every `/api/v1/authorization/llm` route: roles on resources, in SpiceDB through `@gw/core`'s authz. */
export const authorizationRoutes = [
  grant,
  revoke,
  check,
  registerResource,
  listResources,
  deleteResource,
  listGrants,
  resourceAudit,
];
