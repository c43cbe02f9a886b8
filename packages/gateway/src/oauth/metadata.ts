import { MCP_CALL } from "@gw/core/mcp";

/** Where the authorization server's endpoints are, under the gateway's public URL. */
export const OAUTH_PATHS = {
  authorize: "/oauth/authorize",
  token: "/oauth/token",
  register: "/oauth/register",
  revoke: "/oauth/revoke",
  /** Where an organization's OpenID provider sends the browser back (not an endpoint of the metadata). */
  callback: "/oauth/callback",
} as const;

/**
 * RFC 8414's authorization server metadata of the gateway (the issuer is
 * `GATEWAY_PUBLIC_URL`), served at `/.well-known/oauth-authorization-server`
 * and, with OpenID's own fields beside, at `/.well-known/openid-configuration`.
 */
export function authorizationServerMetadata(issuer: string) {
  return {
    issuer,
    authorization_endpoint: `${issuer}${OAUTH_PATHS.authorize}`,
    token_endpoint: `${issuer}${OAUTH_PATHS.token}`,
    registration_endpoint: `${issuer}${OAUTH_PATHS.register}`,
    revocation_endpoint: `${issuer}${OAUTH_PATHS.revoke}`,
    jwks_uri: `${issuer}/.well-known/jwks.json`,
    // The one scope an MCP client may ask for: calling the tools of one MCP server that the user's role allows.
    scopes_supported: [MCP_CALL],
    response_types_supported: ["code"],
    response_modes_supported: ["query"],
    grant_types_supported: ["authorization_code", "refresh_token"],
    code_challenge_methods_supported: ["S256"],
    token_endpoint_auth_methods_supported: ["none"],
    revocation_endpoint_auth_methods_supported: ["none"],
    client_id_metadata_document_supported: true,
    authorization_response_iss_parameter_supported: true,
  };
}
