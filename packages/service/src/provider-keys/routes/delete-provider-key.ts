import { notFound } from "@gw/core/errors";
import { defineRoute } from "@gw/core/http";
import { noContent } from "../../http/schemas.ts";
import { type ProviderKeyRouteDeps, providerParams, TAG } from "./schemas.ts";

/**
 * `DELETE /api/v1/providers/credentials/{provider}` (`admin:api-keys`): the
 * organization's key for the provider is gone (its `byok` deployments are
 * skipped for its next calls); 204, or 404 when none was stored. Audited.
 */
export const deleteProviderKey = defineRoute({
  method: "DELETE",
  path: "/api/v1/providers/credentials/:provider",
  operationId: "deleteProviderCredential",
  summary: "Delete the organization's own key for a provider",
  description:
    "An API key's (a gateway token is 403). The provider's `byok: true` deployments are skipped for the organization's next calls.",
  tag: TAG,
  permission: "admin:api-keys",
  params: providerParams,
  responses: noContent,
  errors: ["not_found"],
  handler: async ({ principal, params, req, res }, deps: ProviderKeyRouteDeps) => {
    if (!(await deps.providerKeys.delete({ principal, requestId: String(req.id) }, params.provider)))
      throw notFound(`No ${params.provider} key is stored for this organization`);
    res.status(204).end();
  },
});
