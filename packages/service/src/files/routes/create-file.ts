import { defineRoute } from "@gw/core/http";
import { ok } from "../../http/schemas.ts";
import { receiveUpload, uploadForm } from "../upload.ts";
import { type FileRouteDeps, TAG } from "./deps.ts";
import { file } from "./schemas.ts";

/**
 * `POST /api/v1/llm/files` (`multipart/form-data`: `file`, `purpose`,
 * `expires_after[anchor]`, `expires_after[seconds]`) → 200 the file. The
 * body is read by the route itself as it arrives (not by the JSON parser):
 * see `receiveUpload`. The principal owns the new `file_…` until it expires.
 */
export const createFile = defineRoute({
  method: "POST",
  path: "/api/v1/llm/files",
  operationId: "createFile",
  summary: "Upload a file (multipart/form-data); the principal becomes its owner",
  description:
    "The file is stored as it arrives, up to `FILE_MAX_BYTES` (413 `file_too_large`) and within the organization's `FILE_STORAGE_QUOTA_BYTES` (413 `storage_quota_exceeded`). It expires `expires_after[seconds]` (60 to 2592000) after it was created, or after `FILE_RETENTION`.",
  tag: TAG,
  permission: "files:write",
  body: uploadForm,
  bodyContentType: "multipart/form-data",
  bodyValidation: { byHandler: true },
  responses: ok("The file", file),
  errors: ["bad_request", "file_too_large", "storage_quota_exceeded"],
  handler: ({ principal, req }, deps: FileRouteDeps) => receiveUpload(deps, principal, req),
});
