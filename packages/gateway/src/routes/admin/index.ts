import { createApiKey } from "./create-api-key.ts";
import { getApiKeyUsage } from "./get-api-key-usage.ts";
import { getEndUserLimits } from "./get-end-user-limits.ts";
import { guardrailDecisionCounts } from "./guardrail-decisions.ts";
import { inspectGrants } from "./inspect-grants.ts";
import { inspectUserResources } from "./inspect-user-resources.ts";
import { listApiKeys } from "./list-api-keys.ts";
import { listAudit } from "./list-audit.ts";
import { listMcpClientGrants, revokeMcpClientGrant } from "./mcp-oauth-grants.ts";
import {
  deleteMcpOAuthIdentityProvider,
  getMcpOAuthIdentityProvider,
  putMcpOAuthIdentityProvider,
} from "./mcp-oauth-identity-provider.ts";
import { revokeApiKey } from "./revoke-api-key.ts";
import { revokeMcpClientAccess } from "./revoke-mcp-client-access.ts";
import { updateApiKey } from "./update-api-key.ts";
import { updateEndUserLimits } from "./update-end-user-limits.ts";

/** Administrators' reads (the admin console): `admin:console`, or for the trail either admin permission. */
export const adminReadRoutes = [inspectGrants, inspectUserResources, listAudit, guardrailDecisionCounts];

/** Key administration (`admin:api-keys`, an API key's only): keys, a key's windows, end-user defaults. */
export const apiKeyRoutes = [
  createApiKey,
  listApiKeys,
  updateApiKey,
  revokeApiKey,
  getApiKeyUsage,
  getEndUserLimits,
  updateEndUserLimits,
  revokeMcpClientAccess,
  listMcpClientGrants,
  revokeMcpClientGrant,
  putMcpOAuthIdentityProvider,
  getMcpOAuthIdentityProvider,
  deleteMcpOAuthIdentityProvider,
];
