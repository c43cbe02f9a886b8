-- The chunks of the files of vector stores, with their embeddings, for search (written and searched by
-- the service's vector index, packages/service/src/vector-stores/pgvector-index.ts).
--
-- pgvector's HNSW index serves one width of vector per index, while a store's width is what its
-- embedding model returns (up to 2,000, the most an HNSW index of `vector` takes). So the table is
-- partitioned by `dimensions`, one partition per width, each with its own HNSW index over the
-- embedding cast to its width (pgvector's answer for several widths in one column: an expression
-- index per width). A partition and its index are created when a width is first stored
-- (`vector_chunks_<width>`, see the index's `ensureWidth`): empty then, so that is instant and reads no
-- other width's rows, which a partial index on one table would.
CREATE EXTENSION IF NOT EXISTS vector;

CREATE TABLE vector_chunks (
  org text NOT NULL,
  vector_store_id text NOT NULL,
  file_id text NOT NULL,
  -- The chunk's place in its file, from 0: with the store and the file, its id.
  chunk_index integer NOT NULL CHECK (chunk_index >= 0),
  dimensions smallint NOT NULL CHECK (dimensions BETWEEN 1 AND 2000),
  text text NOT NULL,
  -- The file's attributes in the store (OpenAI's `attributes`), on every chunk so a filter needs no join.
  attributes jsonb NOT NULL DEFAULT '{}'::jsonb,
  token_count integer NOT NULL CHECK (token_count >= 0),
  embedding vector NOT NULL CHECK (vector_dims(embedding) = dimensions),
  PRIMARY KEY (org, vector_store_id, file_id, chunk_index, dimensions)
) PARTITION BY LIST (dimensions);

-- A file's chunks in every store at once (the file deleted or expired).
CREATE INDEX vector_chunks_file ON vector_chunks (org, file_id);

-- Chunks of a file being ingested, kept apart until the whole file is there: one transaction then moves
-- them into `vector_chunks` and drops the file's earlier chunks, so a search never sees part of a file,
-- and a worker that dies mid-file leaves only rows here, which no search reads.
CREATE TABLE vector_chunks_staged (
  org text NOT NULL,
  vector_store_id text NOT NULL,
  file_id text NOT NULL,
  -- One ingestion of the file; a retry writes under another.
  generation text NOT NULL,
  chunk_index integer NOT NULL CHECK (chunk_index >= 0),
  dimensions smallint NOT NULL CHECK (dimensions BETWEEN 1 AND 2000),
  text text NOT NULL,
  token_count integer NOT NULL CHECK (token_count >= 0),
  embedding vector NOT NULL CHECK (vector_dims(embedding) = dimensions),
  staged_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (org, vector_store_id, file_id, generation, chunk_index)
);

CREATE INDEX vector_chunks_staged_age ON vector_chunks_staged (staged_at);
