import { principalOf, requirePermission } from "@gw/core/http";
import { validate } from "@gw/core/validation";
import type { Router } from "express";
import { audited } from "../../audit/audited.ts";
import type { AuthorizationRouteDeps } from "./deps.ts";
import { resourcePathSchema } from "./resource-params.ts";

/**
 * `DELETE /api/v1/authorization/llm/resources/{resourceType}/{resourceId}` →
 * 204. Owners only (the 403 of grant otherwise); every relationship of the
 * resource goes, so a later check is false for everyone. A conversation or
 * response is 409 for anyone: its authorization goes with its content, through
 * the service's own DELETE.
 */
export function registerDeleteResource(router: Router, deps: AuthorizationRouteDeps): void {
  router.delete(
    "/authorization/llm/resources/:resourceType/:resourceId",
    requirePermission("authorization:write"),
    async (req, res) => {
      const { resourceType, resourceId } = validate("path", resourcePathSchema, req.params);
      const principal = principalOf(res);
      const resource = { type: resourceType, id: resourceId };
      await audited(deps, { principal, requestId: req.id }, { action: "delete", resource }, () =>
        deps.authorization.deleteRegistered(principal, resource),
      );
      res.status(204).end();
    },
  );
}
