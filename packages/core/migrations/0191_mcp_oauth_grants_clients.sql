-- The console lists and revokes MCP clients' authorizations; registrations never used expire (docs/api/mcp-oauth.md).

-- A consent's own id (the console revokes one by it), the client's name as the consent page showed it
-- (a metadata document's name is not stored elsewhere), and when the client last obtained a token under it.
ALTER TABLE oauth_grants ADD COLUMN id text;
UPDATE oauth_grants SET id = 'mcpg_' || md5(org || '/' || user_id || '/' || client_id || '/' || resource);
ALTER TABLE oauth_grants ALTER COLUMN id SET NOT NULL;
CREATE UNIQUE INDEX oauth_grants_id ON oauth_grants (org, id);
ALTER TABLE oauth_grants ADD COLUMN client_name text;
-- Unix seconds; NULL until the first token.
ALTER TABLE oauth_grants ADD COLUMN last_used_at bigint;

-- When a registered client first obtained a token (Unix seconds); NULL: never, and the registration
-- expires a day after it was made.
ALTER TABLE oauth_clients ADD COLUMN used_at bigint;
CREATE INDEX oauth_clients_unused ON oauth_clients (created_at) WHERE used_at IS NULL;
