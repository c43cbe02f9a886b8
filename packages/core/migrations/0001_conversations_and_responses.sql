-- Conversations and their items, stored responses and their input items: the service's content.
-- Every key starts with the organization, so each read stays inside one organization's rows and a
-- later split by organization (hash partitions, Citus's distribution column) needs no new keys.
-- Documents are `json`, not `jsonb`: kept byte for byte (key order, as the API answered them), and
-- large ones are compressed out of line by TOAST.

CREATE TABLE conversations (
  org text NOT NULL,
  id text NOT NULL,
  -- The conversation object as the API answers it.
  body json NOT NULL,
  -- Positions of its items come from this counter, taken under the row's lock: appends never interleave.
  last_position bigint NOT NULL DEFAULT 0,
  -- Created, updated, or given items: what CONVERSATION_IDLE_EXPIRY counts from.
  active_at timestamptz NOT NULL,
  PRIMARY KEY (org, id)
);
-- The sweeper's scan for idle conversations.
CREATE INDEX conversations_active_at ON conversations (active_at);

CREATE TABLE conversation_items (
  org text NOT NULL,
  conversation_id text NOT NULL,
  position bigint NOT NULL,
  id text NOT NULL,
  item json NOT NULL,
  -- Pages in either order, from the start or from a position.
  PRIMARY KEY (org, conversation_id, position),
  -- One item by id (get, delete, the `after` of a page).
  UNIQUE (org, conversation_id, id),
  FOREIGN KEY (org, conversation_id) REFERENCES conversations (org, id) ON DELETE CASCADE
);

CREATE TABLE responses (
  org text NOT NULL,
  id text NOT NULL,
  -- The response object as the API answers it.
  body json NOT NULL,
  -- The items it was asked with (its input_items), read only by that list and by continuations.
  input json NOT NULL,
  -- When it was stored: what RESPONSE_RETENTION counts from.
  stored_at timestamptz NOT NULL,
  PRIMARY KEY (org, id)
);
-- The sweeper's scan for expired responses.
CREATE INDEX responses_stored_at ON responses (stored_at);
