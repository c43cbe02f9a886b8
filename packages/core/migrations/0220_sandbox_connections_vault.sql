-- Stored GitHub connections sealed by the platform's vault (VAULT_KEYS: a data key per token, wrapped by a
-- key-encryption key, re-wrapped when the keys rotate), as MCP credentials and provider keys are. Rows
-- written before keep their nonce, ciphertext and tag (one SANDBOX_CONNECTION_KEY) until the service next
-- reads them and moves them into the vault's columns. A row holds exactly one of the two formats.

ALTER TABLE sandbox_connections
  ADD COLUMN kek_id text,
  ADD COLUMN wrapped_key bytea,
  ADD COLUMN sealed bytea,
  ALTER COLUMN nonce DROP NOT NULL,
  ALTER COLUMN ciphertext DROP NOT NULL,
  ALTER COLUMN tag DROP NOT NULL,
  ADD CONSTRAINT sandbox_connections_one_format CHECK (
    (kek_id IS NOT NULL AND wrapped_key IS NOT NULL AND sealed IS NOT NULL
      AND nonce IS NULL AND ciphertext IS NULL AND tag IS NULL)
    OR (kek_id IS NULL AND wrapped_key IS NULL AND sealed IS NULL
      AND nonce IS NOT NULL AND ciphertext IS NOT NULL AND tag IS NOT NULL)
  );
