import type { ResourceAuthorization } from "@gw/core/authz";
import type { Ids } from "../../ids.ts";
import type { Files } from "../files.ts";

/** What the file routes need. */
export interface FileRouteDeps {
  files: Files;
  authorization: ResourceAuthorization;
  /** Its ids, stamped with the clock's time: files' (`file_…`). */
  ids: Ids;
}

export const TAG = "Files";
