-- Uploaded files (`POST /api/v1/llm/files`): one row each, keyed by organization; their bytes in
-- `file_chunks` (the PostgreSQL implementation of the service's file contents), and each organization's
-- stored bytes in `file_storage`, charged as an upload's pieces arrive and refunded when a file goes.

CREATE TABLE files (
  org text NOT NULL,
  id text NOT NULL,
  filename text NOT NULL,
  -- NULL while the upload is under way (the form's fields may follow the file).
  purpose text,
  -- The media type the upload declared for the file, served back with its content.
  content_type text NOT NULL,
  -- Bytes received and charged so far; the file's size once complete.
  bytes bigint NOT NULL DEFAULT 0,
  -- `uploading` until the whole form is read and its owner written, then `processed`: only processed
  -- files are ever read.
  status text NOT NULL,
  created_at timestamptz NOT NULL,
  -- When the file is gone: its `expires_after` or FILE_RETENTION once complete; while uploading, the
  -- time after which an upload that never finished is swept.
  expires_at timestamptz NOT NULL,
  PRIMARY KEY (org, id)
);
-- The sweeper's scan for expired files (and abandoned uploads).
CREATE INDEX files_expires_at ON files (expires_at);

CREATE TABLE file_chunks (
  org text NOT NULL,
  file_id text NOT NULL,
  -- The piece's place in the file, from 0.
  seq integer NOT NULL,
  data bytea NOT NULL,
  PRIMARY KEY (org, file_id, seq),
  -- A piece never outlives its file's row; a row's delete takes its pieces.
  FOREIGN KEY (org, file_id) REFERENCES files (org, id) ON DELETE CASCADE
);
-- Pieces are stored out of line without trying to compress them: most uploads (PDFs, images, archives)
-- are compressed already, and trying costs more than the write itself (a 1 MiB piece of random bytes is
-- stored about five times faster so).
ALTER TABLE file_chunks ALTER COLUMN data SET STORAGE EXTERNAL;

CREATE TABLE file_storage (
  org text PRIMARY KEY,
  -- Bytes of the organization's files (complete or uploading), as charged against FILE_STORAGE_QUOTA_BYTES.
  bytes bigint NOT NULL CHECK (bytes >= 0)
);
