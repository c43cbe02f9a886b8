import { notFound } from "@gw/core/errors";
import { defineRoute } from "@gw/core/http";
import { deletedSchema } from "@gw/core/openapi";
import { z } from "zod";
import { ok } from "../../http/schemas.ts";
import { listBody } from "../../pagination.ts";
import { oneCursor, storeRole, TAG, unknownCursor, type VectorStoreRouteDeps } from "./deps.ts";
import { attributes, fileListQuery, fileSpec, listOf, specOf, vectorStoreFile } from "./schemas.ts";

/**
 * `POST /api/v1/llm/vector_stores/{id}/files` `{file_id, attributes,
 * chunking_strategy}` → the store's file, `in_progress`: needs writer on the
 * store and reader on the file (404 for a file the principal may not read).
 * It is indexed in the background, its embeddings charged to the calling key.
 */
export const createVectorStoreFile = defineRoute({
  method: "POST",
  path: "/api/v1/llm/vector_stores/:id/files",
  operationId: "createVectorStoreFile",
  summary: "Put a file in a vector store (writer on the store, reader on the file)",
  description:
    "The file is indexed in the background: extracted, cut into chunks and embedded with `VECTOR_STORE_EMBEDDING_MODEL`, charged to the calling key. A file in the store already is indexed again.",
  tag: TAG,
  permission: "vector_stores:write",
  body: fileSpec,
  responses: ok("The vector store file", vectorStoreFile),
  errors: ["not_found"],
  authorize: storeRole("writer"),
  handler: async ({ principal, params, body }, deps: VectorStoreRouteDeps) => {
    const { files } = await deps.vectorStores.attach(principal, params.id!, [
      specOf(body.file_id, body.attributes, body.chunking_strategy),
    ]);
    return files[0]!;
  },
});

/** `GET /api/v1/llm/vector_stores/{id}/files?filter&limit&order&after&before`: the store's files; needs reader. */
export const listVectorStoreFiles = defineRoute({
  method: "GET",
  path: "/api/v1/llm/vector_stores/:id/files",
  operationId: "listVectorStoreFiles",
  summary: "The files of a vector store (reader)",
  tag: TAG,
  permission: "vector_stores:read",
  query: fileListQuery,
  responses: ok("A page of the store's files", listOf(vectorStoreFile)),
  errors: ["not_found"],
  authorize: storeRole("reader"),
  handler: async ({ principal, params, query: q }, deps: VectorStoreRouteDeps) => {
    oneCursor(q);
    const page = await deps.vectorStores.store.listFiles(principal.org, params.id!, {
      ...q,
      status: q.filter,
    });
    if (page === null) throw notFound(`No vector store ${params.id}`);
    if (!page) throw unknownCursor(q);
    return listBody(page.files, page.hasMore);
  },
});

/** `GET /api/v1/llm/vector_stores/{id}/files/{file_id}`: one file of the store, its status; needs reader on the store. */
export const getVectorStoreFile = defineRoute({
  method: "GET",
  path: "/api/v1/llm/vector_stores/:id/files/:fileId",
  operationId: "getVectorStoreFile",
  summary: "A file of a vector store, with its indexing status (reader)",
  tag: TAG,
  permission: "vector_stores:read",
  responses: ok("The vector store file", vectorStoreFile),
  errors: ["not_found"],
  authorize: storeRole("reader"),
  handler: async ({ principal, params }, deps: VectorStoreRouteDeps) => {
    const { id, fileId } = params as { id: string; fileId: string };
    const found = await deps.vectorStores.store.getFile(principal.org, id, fileId);
    if (!found) throw notFound(`No file ${fileId} in vector store ${id}`);
    return found;
  },
});

export const updateVectorStoreFileBody = z.strictObject({ attributes: attributes.nullable() });

/** `POST /api/v1/llm/vector_stores/{id}/files/{file_id}` `{attributes}`: the file's new attributes (on its chunks too); needs writer. */
export const updateVectorStoreFileAttributes = defineRoute({
  method: "POST",
  path: "/api/v1/llm/vector_stores/:id/files/:fileId",
  operationId: "updateVectorStoreFileAttributes",
  summary: "Replace the attributes of a file in a vector store (writer)",
  tag: TAG,
  permission: "vector_stores:write",
  body: updateVectorStoreFileBody,
  responses: ok("The vector store file", vectorStoreFile),
  errors: ["not_found"],
  authorize: storeRole("writer"),
  handler: async ({ principal, params, body }, deps: VectorStoreRouteDeps) => {
    const { id, fileId } = params as { id: string; fileId: string };
    const updated = await deps.vectorStores.setAttributes(
      { org: principal.org, vectorStoreId: id, fileId },
      body.attributes ?? {},
    );
    if (!updated) throw notFound(`No file ${fileId} in vector store ${id}`);
    return updated;
  },
});

/**
 * `DELETE /api/v1/llm/vector_stores/{id}/files/{file_id}` → OpenAI's deleted
 * object: the file's chunks leave the store (the file itself stays); needs writer.
 */
export const deleteVectorStoreFile = defineRoute({
  method: "DELETE",
  path: "/api/v1/llm/vector_stores/:id/files/:fileId",
  operationId: "deleteVectorStoreFile",
  summary: "Take a file out of a vector store (writer); the file itself stays",
  tag: TAG,
  permission: "vector_stores:write",
  responses: ok("Deleted", deletedSchema("vector_store.file.deleted")),
  errors: ["not_found"],
  authorize: storeRole("writer"),
  handler: async ({ principal, params }, deps: VectorStoreRouteDeps) => {
    const { id, fileId } = params as { id: string; fileId: string };
    if (!(await deps.vectorStores.detach({ org: principal.org, vectorStoreId: id, fileId })))
      throw notFound(`No file ${fileId} in vector store ${id}`);
    return { id: fileId, object: "vector_store.file.deleted", deleted: true };
  },
});
