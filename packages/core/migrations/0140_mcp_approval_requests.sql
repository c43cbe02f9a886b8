-- The approval requests of hosted MCP tools in responses (docs/api/mcp.md): what a stored response asked
-- its principal to approve, and whether it was answered. An answer runs the call on the registered server
-- and tool named here, for the principal named here, at most once: it claims the row (answered_at set
-- where it is still NULL) in one conditional UPDATE, the check and the write in one statement.
CREATE TABLE mcp_approval_requests (
  org text NOT NULL,
  -- The mcp_approval_request item's id (mcpr_…).
  id text NOT NULL,
  response_id text NOT NULL,
  -- The principal who made it: the organization above and this user.
  user_id text NOT NULL,
  -- The registered server (mcp_…), never its label: a server registered later under the same label is another.
  server_id text NOT NULL,
  -- The tool's name and the model's arguments as JSON strings: `json` keeps every character the upstream or
  -- the model sent (U+0000 included, which `text` refuses).
  tool json NOT NULL,
  arguments json NOT NULL,
  answered_at timestamptz,
  approved boolean,
  PRIMARY KEY (org, id),
  FOREIGN KEY (org, response_id) REFERENCES responses (org, id) ON DELETE CASCADE
);
-- What the cascade from a deleted (or expired and swept) response looks its approval requests up by.
CREATE INDEX mcp_approval_requests_by_response ON mcp_approval_requests (org, response_id);
