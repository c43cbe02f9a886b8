-- Guardrails (docs/api/guardrails.md), written and read by the service: policies of checks, each a
-- SpiceDB resource `guardrail:<org>/<id>` whose roles decide who sees, changes and deletes it, and the
-- places each is attached (its organization, one of its keys, a model name), which decide the calls it
-- applies to.
CREATE TABLE guardrails (
  org text NOT NULL,
  id text NOT NULL,
  name text NOT NULL,
  -- The checks as the API took them (validated at the edge), in their order; `json`, not `jsonb`, so a
  -- banned word or pattern keeps every character it was given (jsonb cannot hold U+0000).
  checks json NOT NULL,
  applies_to text NOT NULL CHECK (applies_to IN ('input', 'output', 'both')),
  action text NOT NULL CHECK (action IN ('block', 'redact', 'flag')),
  -- One more at each change of the guardrail or its attachments: decisions name the version they ran.
  version bigint NOT NULL DEFAULT 1,
  -- Unix seconds, as the API shows them.
  created_at bigint NOT NULL,
  updated_at bigint NOT NULL,
  PRIMARY KEY (org, id)
);

-- Where a guardrail applies: `organization` (target ''), `key` (target the key id) or `model` (target
-- the model name a call asks for). Deleted with its guardrail.
CREATE TABLE guardrail_attachments (
  org text NOT NULL,
  guardrail_id text NOT NULL,
  scope text NOT NULL CHECK (scope IN ('organization', 'key', 'model')),
  target text NOT NULL,
  PRIMARY KEY (org, guardrail_id, scope, target),
  FOREIGN KEY (org, guardrail_id) REFERENCES guardrails (org, id) ON DELETE CASCADE
);

-- Resolution reads an organization's attachments whole.
CREATE INDEX guardrail_attachments_by_org ON guardrail_attachments (org);
