-- Sandbox sessions and each user's stored GitHub connection, written by the service.

CREATE TABLE sandbox_sessions (
  org text NOT NULL,
  id text NOT NULL,
  -- The user who created it: to anyone else the session does not exist.
  user_id text NOT NULL,
  owner text NOT NULL,
  repository text NOT NULL,
  repository_id bigint NOT NULL,
  -- Incremented by each new assignment (the fence of pushes).
  assignment_generation bigint NOT NULL,
  -- Unix seconds, as the API shows it.
  created_at bigint NOT NULL,
  -- Every read and write names the organization and the id.
  PRIMARY KEY (org, id)
);

CREATE TABLE sandbox_connections (
  org text NOT NULL,
  user_id text NOT NULL,
  -- AES-256-GCM with the principal as additional data: the token is never stored in clear.
  nonce bytea NOT NULL,
  ciphertext bytea NOT NULL,
  tag bytea NOT NULL,
  -- Unix seconds.
  updated_at bigint NOT NULL,
  PRIMARY KEY (org, user_id)
);
