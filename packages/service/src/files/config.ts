import { env } from "@gw/core/config";
import { z } from "zod";

/** 512 MiB: OpenAI's own limit of one file. */
const DEFAULT_MAX_BYTES = 512 * 1024 * 1024;
/** 10 GiB. */
const DEFAULT_QUOTA_BYTES = 10 * 1024 * 1024 * 1024;

/** The files' part of the service's environment (spread into its schema). */
export const filesEnvShape = {
  /** Largest file `POST /api/v1/llm/files` takes, in bytes; a larger one is 413 `file_too_large`. Default 536870912 (512 MiB). */
  FILE_MAX_BYTES: z.coerce.number().int().min(1).max(Number.MAX_SAFE_INTEGER).default(DEFAULT_MAX_BYTES),
  /** Bytes of files one organization may store at once (complete, or being uploaded, until the sweep deletes them once expired); an upload past it is 413 `storage_quota_exceeded`. Default 10737418240 (10 GiB). */
  FILE_STORAGE_QUOTA_BYTES: z.coerce
    .number()
    .int()
    .min(0)
    .max(Number.MAX_SAFE_INTEGER)
    .default(DEFAULT_QUOTA_BYTES),
  /** How long an uploaded file is kept when its upload names no `expires_after`, with a unit (30d, 12h, 5s). Default 30d. */
  FILE_RETENTION: env.duration("30d"),
};

type FilesEnv = z.output<z.ZodObject<typeof filesEnvShape>>;

/** What the files feature is configured with. */
export interface FilesOptions {
  maxBytes: number;
  quotaBytes: number;
  retentionMs: number;
}

export const filesOptions = (c: FilesEnv): FilesOptions => ({
  maxBytes: c.FILE_MAX_BYTES,
  quotaBytes: c.FILE_STORAGE_QUOTA_BYTES,
  retentionMs: c.FILE_RETENTION,
});
