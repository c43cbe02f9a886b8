-- Vector stores (`/api/v1/llm/vector_stores`): the stores, the files attached to each (their ingestion's
-- status), and file batches. The chunks and their embeddings live in the vector database
-- (`packages/core/vector-migrations`); who may read or write a store is SpiceDB's (`vector_store`).

CREATE TABLE vector_stores (
  org text NOT NULL,
  id text NOT NULL,
  name text NOT NULL DEFAULT '',
  metadata jsonb NOT NULL DEFAULT '{}'::jsonb,
  created_at timestamptz NOT NULL,
  -- Moved by use (a file attached, the store modified or searched): the anchor of `expires_after`.
  last_active_at timestamptz NOT NULL,
  -- `expires_after.days`; NULL: the store never expires.
  expires_after_days integer CHECK (expires_after_days BETWEEN 1 AND 365),
  -- last_active_at + expires_after_days, moved with it; NULL without an expiry. Past it the store is gone
  -- from every read at once, and the retention sweep deletes it with its chunks and relationships.
  expires_at timestamptz,
  -- The sums over its files (`vector_store_files`), kept by the trigger below in the transaction of each
  -- change of a file's row, so they are always true.
  usage_bytes bigint NOT NULL DEFAULT 0,
  in_progress integer NOT NULL DEFAULT 0,
  completed integer NOT NULL DEFAULT 0,
  failed integer NOT NULL DEFAULT 0,
  cancelled integer NOT NULL DEFAULT 0,
  PRIMARY KEY (org, id)
);
-- The sweep's scan for expired stores.
CREATE INDEX vector_stores_expires_at ON vector_stores (expires_at) WHERE expires_at IS NOT NULL;

CREATE TABLE vector_store_files (
  org text NOT NULL,
  vector_store_id text NOT NULL,
  file_id text NOT NULL,
  created_at timestamptz NOT NULL,
  status text NOT NULL CHECK (status IN ('in_progress', 'completed', 'failed', 'cancelled')),
  -- OpenAI's `last_error` ({code, message}) once failed.
  last_error jsonb,
  attributes jsonb NOT NULL DEFAULT '{}'::jsonb,
  max_chunk_size_tokens integer NOT NULL,
  chunk_overlap_tokens integer NOT NULL,
  -- Bytes of the file's chunks in the store (their text and embeddings), once completed.
  usage_bytes bigint NOT NULL DEFAULT 0,
  -- The user and API key that attached the file: the ingestion's embeddings are charged to them.
  attached_by_user text NOT NULL,
  attached_by_key text NOT NULL,
  -- The current ingestion of the file: a new attach starts another, and an older one's work is dropped.
  generation text NOT NULL,
  -- How many times a worker began the current ingestion (a worker killed mid-file does not end it).
  attempts integer NOT NULL DEFAULT 0,
  PRIMARY KEY (org, vector_store_id, file_id),
  FOREIGN KEY (org, vector_store_id) REFERENCES vector_stores (org, id) ON DELETE CASCADE
);
-- A file's stores, when the file is deleted or expires.
CREATE INDEX vector_store_files_file ON vector_store_files (org, file_id);
-- A store's files in the order they are listed.
CREATE INDEX vector_store_files_listed ON vector_store_files (org, vector_store_id, created_at, file_id);

CREATE FUNCTION vector_store_file_counted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP IN ('UPDATE', 'DELETE') THEN
    UPDATE vector_stores SET
      usage_bytes = usage_bytes - OLD.usage_bytes,
      in_progress = in_progress - (OLD.status = 'in_progress')::int,
      completed = completed - (OLD.status = 'completed')::int,
      failed = failed - (OLD.status = 'failed')::int,
      cancelled = cancelled - (OLD.status = 'cancelled')::int
    WHERE org = OLD.org AND id = OLD.vector_store_id;
  END IF;
  IF TG_OP IN ('INSERT', 'UPDATE') THEN
    UPDATE vector_stores SET
      usage_bytes = usage_bytes + NEW.usage_bytes,
      in_progress = in_progress + (NEW.status = 'in_progress')::int,
      completed = completed + (NEW.status = 'completed')::int,
      failed = failed + (NEW.status = 'failed')::int,
      cancelled = cancelled + (NEW.status = 'cancelled')::int
    WHERE org = NEW.org AND id = NEW.vector_store_id;
  END IF;
  RETURN NULL;
END $$;

CREATE TRIGGER vector_store_files_counted
  AFTER INSERT OR DELETE OR UPDATE OF status, usage_bytes ON vector_store_files
  FOR EACH ROW EXECUTE FUNCTION vector_store_file_counted();

CREATE TABLE vector_store_file_batches (
  org text NOT NULL,
  id text NOT NULL,
  vector_store_id text NOT NULL,
  created_at timestamptz NOT NULL,
  cancelled boolean NOT NULL DEFAULT false,
  PRIMARY KEY (org, id),
  FOREIGN KEY (org, vector_store_id) REFERENCES vector_stores (org, id) ON DELETE CASCADE
);

-- A batch's files; their statuses are their rows' in `vector_store_files` (counted when read).
CREATE TABLE vector_store_file_batch_files (
  org text NOT NULL,
  batch_id text NOT NULL,
  file_id text NOT NULL,
  PRIMARY KEY (org, batch_id, file_id),
  FOREIGN KEY (org, batch_id) REFERENCES vector_store_file_batches (org, id) ON DELETE CASCADE
);
