import { defineRoute } from "@gw/core/http";
import { objectSchema } from "@gw/core/openapi";
import { authorizationServerMetadata } from "../../oauth/metadata.ts";
import { SIGNING_ALGORITHMS } from "../../tokens/signing-keys.ts";
import type { TokenService } from "../../tokens/tokens.ts";

/**
 * `GET /.well-known/jwks.json` and `GET /.well-known/openid-configuration`:
 * public and cacheable, so any audience can verify gateway tokens with a
 * stock library (`jose.createRemoteJWKSet`).
 */
export const jwks = defineRoute({
  method: "GET",
  path: "/.well-known/jwks.json",
  operationId: "getJwks",
  summary: "The public keys that verify the gateway's tokens",
  tag: "Authentication",
  auth: "none",
  responses: {
    200: {
      description: "A JSON Web Key Set",
      schema: objectSchema({ keys: { type: "array", items: { type: "object" } } }),
    },
  },
  handler: ({ res }, { tokens }: { tokens: TokenService }) => {
    res.set("Cache-Control", "public, max-age=300");
    return { keys: tokens.publicJwks };
  },
});

export const openIdConfiguration = defineRoute({
  method: "GET",
  path: "/.well-known/openid-configuration",
  operationId: "getOpenIdConfiguration",
  summary: "OpenID discovery: the authorization server's metadata, the JWKS address, signing algorithms",
  tag: "Authentication",
  auth: "none",
  responses: { 200: { description: "OpenID Connect discovery metadata", schema: { type: "object" } } },
  handler: ({ res }, { tokens }: { tokens: TokenService }) => {
    res.set("Cache-Control", "public, max-age=300");
    return {
      ...authorizationServerMetadata(tokens.issuer),
      id_token_signing_alg_values_supported: [...SIGNING_ALGORITHMS],
      subject_types_supported: ["public"],
      claims_supported: ["iss", "sub", "aud", "iat", "nbf", "exp", "jti", "org", "key_id", "permissions"],
    };
  },
});

/**
 * `GET /.well-known/oauth-authorization-server`: RFC 8414's metadata, which
 * MCP clients read after the protected-resource metadata names the gateway
 * (docs/api/mcp-oauth.md).
 */
export const oauthAuthorizationServer = defineRoute({
  method: "GET",
  path: "/.well-known/oauth-authorization-server",
  operationId: "getOAuthAuthorizationServerMetadata",
  summary: "RFC 8414 metadata of the gateway's OAuth authorization server (for MCP clients)",
  tag: "Authentication",
  auth: "none",
  responses: { 200: { description: "Authorization server metadata", schema: { type: "object" } } },
  handler: ({ res }, { tokens }: { tokens: TokenService }) => {
    res.set("Cache-Control", "public, max-age=300");
    return authorizationServerMetadata(tokens.issuer);
  },
});
