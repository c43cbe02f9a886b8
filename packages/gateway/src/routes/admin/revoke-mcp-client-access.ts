import { defineRoute } from "@gw/core/http";
import { objectSchema } from "@gw/core/openapi";
import { userIdSchema } from "@gw/core/principal";
import { storableText } from "@gw/core/validation";
import { z } from "zod";
import type { ConsentGrants } from "../../oauth/grants.ts";
import type { RefreshTokens } from "../../oauth/refresh-tokens.ts";
import { TAG } from "./schemas.ts";

export interface RevokeMcpClientAccessResponse {
  /** Refresh tokens revoked: the client gets no new access token from them. */
  revokedTokens: number;
  /** Consents forgotten: the next authorization asks the user again. */
  removedGrants: number;
}

/**
 * `POST /api/v1/admin/mcp-oauth/revoke`: ends what MCP clients signed in as
 * `userId` of the organization may do (one client with `clientId`): their
 * refresh tokens are revoked and the consents forgotten, and the access
 * tokens already issued are refused from the next call on.
 */
export const revokeMcpClientAccess = defineRoute({
  method: "POST",
  path: "/api/v1/admin/mcp-oauth/revoke",
  operationId: "revokeMcpClientAccess",
  summary: "Revoke the OAuth access of MCP clients signed in as a user (their refresh tokens and consents)",
  tag: TAG,
  permission: "admin:api-keys",
  body: z.strictObject({
    userId: userIdSchema,
    clientId: storableText(z.string().min(1).max(2_000)).optional(),
  }),
  responses: {
    200: {
      description: "What was revoked",
      schema: objectSchema({ revokedTokens: { type: "integer" }, removedGrants: { type: "integer" } }),
    },
  },
  handler: async (
    { principal, body },
    deps: { oauth?: { refreshTokens: RefreshTokens; grants: ConsentGrants } },
  ): Promise<RevokeMcpClientAccessResponse> => {
    if (!deps.oauth) throw new Error("The OAuth authorization server is not configured");
    const [revokedTokens, removedGrants] = await Promise.all([
      deps.oauth.refreshTokens.revokeFor(principal.org, body.userId, body.clientId),
      deps.oauth.grants.remove(principal.org, body.userId, body.clientId),
    ]);
    return { revokedTokens, removedGrants };
  },
});
