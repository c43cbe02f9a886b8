-- The gateway's OAuth authorization server for MCP clients (docs/api/mcp-oauth.md, ADR 0023).

-- Clients registered with dynamic client registration (RFC 7591). Public clients only: no secret. A
-- client whose id is an https URL (a Client ID Metadata Document) is not stored here; its document is
-- fetched and cached.
CREATE TABLE oauth_clients (
  client_id text PRIMARY KEY,
  client_name text,
  -- The redirect URIs the client registered, exactly as given (an authorization request must name one).
  redirect_uris jsonb NOT NULL,
  -- Unix seconds.
  created_at bigint NOT NULL
);

-- Consent an end user gave a client for one MCP server (the resource), the latest decision kept.
CREATE TABLE oauth_grants (
  org text NOT NULL,
  user_id text NOT NULL,
  client_id text NOT NULL,
  -- The MCP proxy URL the tokens are for (their `aud`).
  resource text NOT NULL,
  scope text NOT NULL,
  -- Unix seconds.
  granted_at bigint NOT NULL,
  PRIMARY KEY (org, user_id, client_id, resource)
);

-- Refresh tokens, one row per token ever issued, kept by the SHA-256 of the token (never the token).
-- Rotating: each is used once; the tokens one authorization produced share a family, and a second use of
-- any of them revokes the whole family.
CREATE TABLE oauth_refresh_tokens (
  token_hash text PRIMARY KEY,
  family text NOT NULL,
  org text NOT NULL,
  user_id text NOT NULL,
  -- The API key the sign-in used: its quotas and revocation apply to every token of the family.
  key_id text NOT NULL,
  client_id text NOT NULL,
  resource text NOT NULL,
  scope text NOT NULL,
  -- Unix seconds.
  created_at bigint NOT NULL,
  expires_at bigint NOT NULL,
  used_at bigint,
  revoked_at bigint
);
CREATE INDEX oauth_refresh_tokens_family ON oauth_refresh_tokens (family);
CREATE INDEX oauth_refresh_tokens_user ON oauth_refresh_tokens (org, user_id, client_id);
CREATE INDEX oauth_refresh_tokens_expires_at ON oauth_refresh_tokens (expires_at);
