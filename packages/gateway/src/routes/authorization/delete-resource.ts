import { defineRoute } from "@gw/core/http";
import { audited } from "../../audit/audited.ts";
import { type AuthorizationRouteDeps, TAG } from "./deps.ts";
import { resourcePathSchema } from "./resource-params.ts";

/**
 * `DELETE /api/v1/authorization/llm/resources/{resourceType}/{resourceId}` →
 * 204. Owners only (the 403 of grant otherwise); every relationship of the
 * resource goes, so a later check is false for everyone. A conversation or
 * response is 409 for anyone: its authorization goes with its content, through
 * the service's own DELETE.
 */
export const deleteResource = defineRoute({
  method: "DELETE",
  path: "/api/v1/authorization/llm/resources/:resourceType/:resourceId",
  operationId: "deleteResource",
  summary: "Delete a registered resource's relationships",
  description: "Owners only. A conversation or response is 409: its own DELETE removes it.",
  tag: TAG,
  permission: "authorization:write",
  params: resourcePathSchema,
  responses: { 204: { description: "Done; no body" } },
  errors: ["conflict"],
  handler: async ({ principal, params, req, res }, deps: AuthorizationRouteDeps) => {
    const resource = { type: params.resourceType, id: params.resourceId };
    await audited(deps, { principal, requestId: req.id }, { action: "delete", resource }, () =>
      deps.authorization.deleteRegistered(principal, resource),
    );
    res.status(204).end();
  },
});
