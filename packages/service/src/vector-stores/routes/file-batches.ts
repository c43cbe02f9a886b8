import { notFound } from "@gw/core/errors";
import { defineRoute } from "@gw/core/http";
import { z } from "zod";
import { ok } from "../../http/schemas.ts";
import { listBody } from "../../pagination.ts";
import { oneCursor, storeRole, TAG, unknownCursor, type VectorStoreRouteDeps } from "./deps.ts";
import {
  attributes,
  chunkingStrategy,
  fileBatch,
  fileId,
  fileListQuery,
  fileSpec,
  listOf,
  specOf,
  vectorStoreFile,
} from "./schemas.ts";

/** Files of one batch, at most (OpenAI's limit). */
export const MAX_BATCH_FILES = 2_000;

export const createFileBatchBody = z
  .strictObject({
    file_ids: z.array(fileId).min(1).max(MAX_BATCH_FILES).optional(),
    files: z.array(fileSpec).min(1).max(MAX_BATCH_FILES).optional(),
    attributes: attributes.nullable().optional(),
    chunking_strategy: chunkingStrategy.optional(),
  })
  .superRefine((body, ctx) => {
    if ((body.file_ids === undefined) === (body.files === undefined))
      ctx.addIssue({
        code: "custom",
        path: [body.file_ids === undefined ? "file_ids" : "files"],
        message: "Give file_ids or files, one of them",
        params: { type: "value_error" },
      });
  });

/**
 * `POST /api/v1/llm/vector_stores/{id}/file_batches` `{file_ids, attributes,
 * chunking_strategy}` or `{files: [{file_id, attributes, chunking_strategy}]}`
 * → the batch: needs writer on the store and reader on every file (404 for
 * the first one the principal may not read, and nothing is attached).
 */
export const createFileBatch = defineRoute({
  method: "POST",
  path: "/api/v1/llm/vector_stores/:id/file_batches",
  operationId: "createVectorStoreFileBatch",
  summary: "Put up to 2,000 files in a vector store at once (writer on the store, reader on each file)",
  tag: TAG,
  permission: "vector_stores:write",
  body: createFileBatchBody,
  responses: ok("The file batch", fileBatch),
  errors: ["not_found"],
  authorize: storeRole("writer"),
  handler: async ({ principal, params, body }, deps: VectorStoreRouteDeps) => {
    const specs = body.files
      ? body.files.map((f) => specOf(f.file_id, f.attributes, f.chunking_strategy))
      : body.file_ids!.map((id) => specOf(id, body.attributes, body.chunking_strategy));
    const { batch } = await deps.vectorStores.attach(principal, params.id!, specs, true);
    return batch!;
  },
});

/** `GET /api/v1/llm/vector_stores/{id}/file_batches/{batch_id}`: the batch and its files' counts; needs reader. */
export const getFileBatch = defineRoute({
  method: "GET",
  path: "/api/v1/llm/vector_stores/:id/file_batches/:batchId",
  operationId: "getVectorStoreFileBatch",
  summary: "A file batch of a vector store (reader)",
  tag: TAG,
  permission: "vector_stores:read",
  responses: ok("The file batch", fileBatch),
  errors: ["not_found"],
  authorize: storeRole("reader"),
  handler: async ({ principal, params }, deps: VectorStoreRouteDeps) => {
    const { id, batchId } = params as { id: string; batchId: string };
    const found = await deps.vectorStores.store.getBatch(principal.org, id, batchId);
    if (!found) throw notFound(`No file batch ${batchId} in vector store ${id}`);
    return found;
  },
});

/**
 * `POST /api/v1/llm/vector_stores/{id}/file_batches/{batch_id}/cancel` → the
 * batch: its files still in progress become `cancelled` and their indexing
 * stops, leaving nothing searchable; needs writer.
 */
export const cancelFileBatch = defineRoute({
  method: "POST",
  path: "/api/v1/llm/vector_stores/:id/file_batches/:batchId/cancel",
  operationId: "cancelVectorStoreFileBatch",
  summary: "Cancel the indexing of a file batch's files still in progress (writer)",
  tag: TAG,
  permission: "vector_stores:write",
  responses: ok("The file batch", fileBatch),
  errors: ["not_found"],
  authorize: storeRole("writer"),
  handler: async ({ principal, params }, deps: VectorStoreRouteDeps) => {
    const { id, batchId } = params as { id: string; batchId: string };
    const cancelled = await deps.vectorStores.store.cancelBatch(principal.org, id, batchId);
    if (!cancelled) throw notFound(`No file batch ${batchId} in vector store ${id}`);
    return cancelled;
  },
});

/** `GET /api/v1/llm/vector_stores/{id}/file_batches/{batch_id}/files`: the batch's files; needs reader. */
export const listFileBatchFiles = defineRoute({
  method: "GET",
  path: "/api/v1/llm/vector_stores/:id/file_batches/:batchId/files",
  operationId: "listFilesInVectorStoreBatch",
  summary: "The files of a file batch (reader)",
  tag: TAG,
  permission: "vector_stores:read",
  query: fileListQuery,
  responses: ok("A page of the batch's files", listOf(vectorStoreFile)),
  errors: ["not_found"],
  authorize: storeRole("reader"),
  handler: async ({ principal, params, query: q }, deps: VectorStoreRouteDeps) => {
    const { id, batchId } = params as { id: string; batchId: string };
    oneCursor(q);
    if (!(await deps.vectorStores.store.getBatch(principal.org, id, batchId)))
      throw notFound(`No file batch ${batchId} in vector store ${id}`);
    const page = await deps.vectorStores.store.listFiles(principal.org, id, {
      ...q,
      status: q.filter,
      batchId,
    });
    if (page === null) throw notFound(`No vector store ${id}`);
    if (!page) throw unknownCursor(q);
    return listBody(page.files, page.hasMore);
  },
});
