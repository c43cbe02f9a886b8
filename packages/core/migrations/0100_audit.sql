-- The audit trail of role changes (register, grant, revoke, delete), written by the gateway.
-- A row is written before the change is made (outcome 'unknown') and its outcome set after,
-- so no change lands without its record. Rows are never updated otherwise.

CREATE TABLE audit_records (
  -- Order of writing; with `at`, the cursor of listings (`<at in ms>-<seq>`).
  seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  org text NOT NULL,
  -- When the change was asked, to the millisecond (the cursor carries it exactly).
  at timestamptz NOT NULL,
  resource_type text NOT NULL,
  resource_id text NOT NULL,
  -- What was asked and by whom: the record as listed, without its outcome and ZedToken.
  record json NOT NULL,
  -- allowed, denied, conflict, error; unknown until the change has answered.
  outcome text NOT NULL,
  zed_token text
);
-- An organization's trail, newest first (GET /admin/audit, `pnpm authz audit --org`).
CREATE INDEX audit_records_org ON audit_records (org, at DESC, seq DESC);
-- One resource's trail, newest first (GET .../resources/{type}/{id}/audit, `--resource`).
CREATE INDEX audit_records_resource ON audit_records (org, resource_type, resource_id, at DESC, seq DESC);
-- The retention sweep's scan for the oldest rows: rows arrive in time order, so a BRIN index is
-- a few pages however large the table grows.
CREATE INDEX audit_records_at ON audit_records USING brin (at);
