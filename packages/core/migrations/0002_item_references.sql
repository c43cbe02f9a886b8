-- Items found by id alone, for `item_reference`s: which conversation or stored response holds an item.
-- Item ids are the service's own (a prefix and 128 random bits), unique within an organization.

-- A conversation's item by (org, id), wherever it is. It also serves every read by (org, conversation, id)
-- (get, delete, the `after` of a page), so the narrower unique constraint goes: one index less per insert.
CREATE UNIQUE INDEX conversation_items_by_id ON conversation_items (org, id);
ALTER TABLE conversation_items DROP CONSTRAINT conversation_items_org_conversation_id_id_key;

-- The stored response whose input or output holds an item; its rows go with the response.
CREATE TABLE response_items (
  org text NOT NULL,
  item_id text NOT NULL,
  response_id text NOT NULL,
  PRIMARY KEY (org, item_id),
  FOREIGN KEY (org, response_id) REFERENCES responses (org, id) ON DELETE CASCADE
);
-- What the cascade from a deleted response looks its items up by.
CREATE INDEX response_items_by_response ON response_items (org, response_id);
