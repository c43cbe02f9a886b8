import type { Route } from "@gw/core/http";
import { createFile } from "./create-file.ts";
import { deleteFile } from "./delete-file.ts";
import type { FileRouteDeps } from "./deps.ts";
import { getFile } from "./get-file.ts";
import { getFileContent } from "./get-file-content.ts";
import { listFiles } from "./list-files.ts";

export type { FileRouteDeps };

/** Every `/api/v1/llm/files` route. */
export const fileRoutes: Route<FileRouteDeps>[] = [
  createFile,
  listFiles,
  getFile,
  getFileContent,
  deleteFile,
];
