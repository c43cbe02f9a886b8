-- Registered MCP servers and the vault of their credentials, written by the gateway.
-- Who may use a server, and which role each tool needs, is in SpiceDB (mcp_server, mcp_tool).

CREATE TABLE mcp_servers (
  org text NOT NULL,
  id text NOT NULL,
  name text NOT NULL,
  url text NOT NULL,
  description text,
  -- Unix seconds, as the API shows them.
  created_at bigint NOT NULL,
  -- Every read and write names the organization and the id.
  PRIMARY KEY (org, id)
);

-- Envelope encryption (packages/core/src/mcp/vault.ts): the secret is sealed with a data key of its own
-- (AES-256-GCM), the data key with the key-encryption key `kek_id` of VAULT_KEYS; both bind the
-- organization, server, owner of the credential and the server's origin as additional data.
CREATE TABLE mcp_credentials (
  org text NOT NULL,
  server_id text NOT NULL,
  -- '' for the shared credential, else the user it belongs to.
  user_id text NOT NULL,
  -- bearer or header; for header, its name (never the value).
  type text NOT NULL,
  header_name text,
  kek_id text NOT NULL,
  wrapped_key bytea NOT NULL,
  sealed bytea NOT NULL,
  created_at bigint NOT NULL,
  last_used_at bigint,
  PRIMARY KEY (org, server_id, user_id),
  FOREIGN KEY (org, server_id) REFERENCES mcp_servers (org, id) ON DELETE CASCADE
);
