-- An organization's own OpenID Connect provider, where its end users sign in to authorize MCP clients
-- (docs/api/mcp-oauth.md, ADR 0023). One per organization.
CREATE TABLE oauth_identity_providers (
  org text PRIMARY KEY,
  -- The provider's issuer (its discovery document is at issuer + /.well-known/openid-configuration).
  issuer text NOT NULL,
  -- The gateway's client at the provider.
  client_id text NOT NULL,
  -- The client secret, sealed by the vault with the organization, issuer and client id; its last 4
  -- characters are what the API shows.
  client_secret_last4 text NOT NULL,
  kek_id text NOT NULL,
  wrapped_key bytea NOT NULL,
  sealed bytea NOT NULL,
  -- The API key of the organization the signed-in end users act through (as X-On-Behalf-Of would name
  -- them): its mcp:call, on-behalf-of policy, quotas and revocation apply to their tokens.
  key_id text NOT NULL,
  -- Unix seconds.
  created_at bigint NOT NULL,
  updated_at bigint NOT NULL
);
