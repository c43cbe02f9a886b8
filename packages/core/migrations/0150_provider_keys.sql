-- Organizations' own provider keys (BYOK), written and read by the service: one per organization and
-- provider kind (openai, azure, anthropic). A catalogue deployment marked `byok: true` uses the calling
-- organization's key for its kind.
-- Envelope encryption (packages/core/src/mcp/vault.ts, the vault of MCP credentials, the same VAULT_KEYS):
-- the key is sealed with a data key of its own, the data key with the key-encryption key `kek_id`; both
-- bind the organization, the provider and the base_url as additional data, so a row moved to another
-- organization or pointed at another address does not open.
CREATE TABLE provider_keys (
  org text NOT NULL,
  provider text NOT NULL,
  -- Where the key is sent instead of the deployment's base_url; checked as MCP upstreams are.
  base_url text,
  -- What the API shows of the key: its last four characters, never more.
  api_key_last4 text NOT NULL,
  kek_id text NOT NULL,
  wrapped_key bytea NOT NULL,
  sealed bytea NOT NULL,
  -- One more at each store: the first use of each revision is audited once, by whichever replica
  -- sets first_used_at (a conditional update), and a re-wrap never pairs a new secret with an old data key.
  revision bigint NOT NULL,
  -- Unix seconds, as the API shows them.
  created_at bigint NOT NULL,
  updated_at bigint NOT NULL,
  -- The first call made with this revision; NULL until then.
  first_used_at bigint,
  PRIMARY KEY (org, provider)
);
