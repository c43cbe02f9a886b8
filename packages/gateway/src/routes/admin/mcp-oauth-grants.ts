import { notFound } from "@gw/core/errors";
import { defineRoute } from "@gw/core/http";
import { objectSchema } from "@gw/core/openapi";
import { userIdSchema } from "@gw/core/principal";
import { z } from "zod";
import { type ConsentGrants, type ListedGrant, MAX_LISTED_GRANTS } from "../../oauth/grants.ts";
import type { RefreshTokens } from "../../oauth/refresh-tokens.ts";
import { TAG } from "./schemas.ts";

type OAuthDeps = { oauth?: { refreshTokens: RefreshTokens; grants: ConsentGrants } };

const oauthOf = (deps: OAuthDeps) => {
  if (!deps.oauth) throw new Error("The OAuth authorization server is not configured");
  return deps.oauth;
};

export interface ListMcpClientGrantsResponse {
  data: ListedGrant[];
}

const nullable = (type: string) => ({ type: [type, "null"] });

/**
 * `GET /api/v1/admin/mcp-oauth/grants`: the MCP clients the organization's
 * users authorized (their consents), newest first: the console's
 * "Authorized clients".
 */
export const listMcpClientGrants = defineRoute({
  method: "GET",
  path: "/api/v1/admin/mcp-oauth/grants",
  operationId: "listMcpClientGrants",
  summary: `The MCP clients the organization's users authorized with OAuth, newest first (at most ${MAX_LISTED_GRANTS})`,
  tag: TAG,
  permission: "admin:api-keys",
  query: z.object({ userId: userIdSchema.optional() }),
  responses: {
    200: {
      description: "The authorizations",
      schema: objectSchema({
        data: {
          type: "array",
          items: objectSchema({
            id: { type: "string" },
            userId: { type: "string" },
            clientId: { type: "string" },
            clientName: nullable("string"),
            serverId: { type: "string" },
            serverName: nullable("string"),
            resource: { type: "string" },
            scope: { type: "string" },
            grantedAt: { type: "integer" },
            lastUsedAt: nullable("integer"),
          }),
        },
      }),
    },
  },
  handler: async ({ principal, query }, deps: OAuthDeps): Promise<ListMcpClientGrantsResponse> => ({
    data: await oauthOf(deps).grants.list(principal.org, query.userId),
  }),
});

/**
 * `DELETE /api/v1/admin/mcp-oauth/grants/{id}`: revokes one authorization:
 * the consent is forgotten and its refresh tokens revoked, and the access
 * tokens already issued under it are refused from the next call on.
 */
export const revokeMcpClientGrant = defineRoute({
  method: "DELETE",
  path: "/api/v1/admin/mcp-oauth/grants/:id",
  operationId: "revokeMcpClientGrant",
  summary: "Revoke one MCP client's authorization (its tokens end at the next call)",
  tag: TAG,
  permission: "admin:api-keys",
  params: z.object({ id: z.string().regex(/^mcpg_[0-9a-f]{32}$/, "not an authorization id") }),
  responses: {
    200: {
      description: "What was revoked",
      schema: objectSchema({ id: { type: "string" }, revokedTokens: { type: "integer" } }),
    },
  },
  errors: ["not_found"],
  handler: async ({ principal, params }, deps: OAuthDeps) => {
    const oauth = oauthOf(deps);
    const revoked = await oauth.grants.revokeById(principal.org, params.id, oauth.refreshTokens);
    if (!revoked) throw notFound(`No authorization ${params.id} in this organization`);
    return { id: params.id, revokedTokens: revoked.revokedTokens };
  },
});
