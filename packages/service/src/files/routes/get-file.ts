import { notFound } from "@gw/core/errors";
import { defineRoute } from "@gw/core/http";
import { roleOn } from "../../http/roles.ts";
import { ok } from "../../http/schemas.ts";
import { type FileRouteDeps, TAG } from "./deps.ts";
import { file } from "./schemas.ts";

/** `GET /api/v1/llm/files/{id}`: a file; needs reader. */
export const getFile = defineRoute({
  method: "GET",
  path: "/api/v1/llm/files/:id",
  operationId: "getFile",
  summary: "A file (reader)",
  tag: TAG,
  permission: "files:read",
  responses: ok("The file", file),
  errors: ["not_found"],
  authorize: roleOn("file", "reader"),
  handler: async ({ principal, params }, deps: FileRouteDeps) => {
    const found = await deps.files.get(principal.org, params.id!);
    if (!found) throw notFound(`No file ${params.id}`);
    const { contentType: _type, ...object } = found;
    return object;
  },
});
