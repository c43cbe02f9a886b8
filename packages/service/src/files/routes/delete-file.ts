import { notFound } from "@gw/core/errors";
import { defineRoute } from "@gw/core/http";
import { deletedSchema } from "@gw/core/openapi";
import { roleOn } from "../../http/roles.ts";
import { ok } from "../../http/schemas.ts";
import { type FileRouteDeps, TAG } from "./deps.ts";

/**
 * `DELETE /api/v1/llm/files/{id}` → OpenAI's `{id, object: "file", deleted: true}`:
 * needs owner. Its relationships go first, guarded by the caller's ownership
 * when the delete lands; then what was made of it, its bytes and its record.
 */
export const deleteFile = defineRoute({
  method: "DELETE",
  path: "/api/v1/llm/files/:id",
  operationId: "deleteFile",
  summary: "Delete a file, its content and its relationships (owner)",
  tag: TAG,
  permission: "files:write",
  responses: ok("Deleted", deletedSchema("file")),
  errors: ["not_found"],
  authorize: roleOn("file", "owner"),
  handler: async ({ principal, params }, deps: FileRouteDeps) => {
    const id = params.id!;
    // Only an uploaded file: an id another backend registered is that backend's to drop.
    if (!(await deps.files.get(principal.org, id))) throw notFound(`No file ${id}`);
    await deps.authorization.deleteResource(principal, { type: "file", id });
    await deps.files.delete({ org: principal.org, id });
    return { id, object: "file", deleted: true };
  },
});
