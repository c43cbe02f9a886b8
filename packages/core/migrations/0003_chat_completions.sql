-- Stored chat completions (`store: true`) and the messages they were asked with, kept like stored
-- responses: one row each, keyed by organization, gone RESPONSE_RETENTION after they were stored.

CREATE TABLE chat_completions (
  org text NOT NULL,
  id text NOT NULL,
  -- The ChatCompletion as the API answers it (its metadata replaced by updates).
  body json NOT NULL,
  -- The messages it was asked with, read only by its messages list.
  messages json NOT NULL,
  -- When it was stored: what RESPONSE_RETENTION counts from.
  stored_at timestamptz NOT NULL,
  -- Get, update, delete, and the many a list looks up at once (`id = ANY(…)`).
  PRIMARY KEY (org, id)
);
-- The sweeper's scan for expired completions.
CREATE INDEX chat_completions_stored_at ON chat_completions (stored_at);
