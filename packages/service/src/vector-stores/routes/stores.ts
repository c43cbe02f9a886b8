import { notFound } from "@gw/core/errors";
import { defineRoute } from "@gw/core/http";
import { deletedSchema } from "@gw/core/openapi";
import { z } from "zod";
import { ok } from "../../http/schemas.ts";
import { listBody } from "../../pagination.ts";
import { notSupported } from "../../schema.ts";
import type { VectorStoreObject } from "../store.ts";
import { oneCursor, storeRole, TAG, unknownCursor, type VectorStoreRouteDeps } from "./deps.ts";
import {
  chunkingStrategy,
  expiresAfter,
  fileId,
  listOf,
  listQuery,
  specOf,
  storeMetadata,
  vectorStore,
} from "./schemas.ts";

/** Files named at a store's creation, at most (OpenAI's limit). */
export const MAX_CREATE_FILES = 500;
/** Readable stores looked at for one list at most; beyond them the list is cut (and says `has_more`). */
export const MAX_LISTED_STORES = 10_000;
// SpiceDB takes at most 1000 per call, and `lookup` asks for one more than its page.
const LOOKUP_PAGE = 999;

const name = z
  .string()
  .max(256)
  .refine((v) => !v.includes("\u0000"), {
    message: "Text must not contain U+0000",
    params: { type: "value_error" },
  });

export const createVectorStoreBody = z.strictObject({
  name: name.optional(),
  file_ids: z.array(fileId).max(MAX_CREATE_FILES).optional(),
  expires_after: expiresAfter.optional(),
  chunking_strategy: chunkingStrategy.optional(),
  metadata: storeMetadata.nullable().optional(),
  description: notSupported("description"),
});

/**
 * `POST /api/v1/llm/vector_stores` `{name, file_ids, expires_after,
 * chunking_strategy, metadata}` → 200 the store. The principal (the end user
 * of `X-On-Behalf-Of`, else the key's owner) owns it; each file named must be
 * one it may read, and is indexed in the background.
 */
export const createVectorStore = defineRoute({
  method: "POST",
  path: "/api/v1/llm/vector_stores",
  operationId: "createVectorStore",
  summary: "Create a vector store; the principal becomes its owner",
  description:
    "Files named in `file_ids` must be readable by the principal (404 otherwise); each is indexed in the background (its status in `GET /vector_stores/{id}/files/{file_id}`).",
  tag: TAG,
  permission: "vector_stores:write",
  body: createVectorStoreBody,
  bodyValidation: { prepare: (raw) => (raw === undefined ? {} : raw) },
  responses: ok("The vector store", vectorStore),
  errors: ["not_found"],
  handler: async ({ principal, body }, deps: VectorStoreRouteDeps) =>
    deps.vectorStores.create(principal, {
      name: body.name ?? "",
      metadata: body.metadata ?? {},
      expiresAfterDays: body.expires_after?.days ?? null,
      files: (body.file_ids ?? []).map((id) => specOf(id, {}, body.chunking_strategy)),
    }),
});

/**
 * `GET /api/v1/llm/vector_stores?limit&order&after&before`: the stores the
 * principal may read (SpiceDB's LookupResources: stores shared with it
 * included), newest first unless `order=asc`.
 */
export const listVectorStores = defineRoute({
  method: "GET",
  path: "/api/v1/llm/vector_stores",
  operationId: "listVectorStores",
  summary: "The vector stores the principal may read",
  tag: TAG,
  permission: "vector_stores:read",
  query: listQuery,
  responses: ok("A page of vector stores", listOf(vectorStore)),
  handler: async ({ principal, query: q }, deps: VectorStoreRouteDeps) => {
    oneCursor(q);
    const ids: string[] = [];
    let after: string | undefined;
    let more = true;
    while (more && ids.length < MAX_LISTED_STORES) {
      const page = await deps.authorization.lookup(principal, "vector_store", "reader", {
        limit: LOOKUP_PAGE,
        after,
      });
      ids.push(...page.resourceIds);
      after = page.resourceIds.at(-1);
      more = page.more && after !== undefined;
    }
    const stores = (
      await deps.vectorStores.store.getMany(principal.org, ids.slice(0, MAX_LISTED_STORES))
    ).sort((a, b) => a.created_at - b.created_at || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
    const ordered = q.order === "asc" ? stores : stores.reverse();
    const page = pageAround(ordered, q);
    if (!page) throw unknownCursor(q);
    return listBody(page.items, page.hasMore || more);
  },
});

/** The page of `items` (in list order) after `after`, or before `before`, or from the start. */
function pageAround(
  items: VectorStoreObject[],
  q: { limit: number; after?: string | undefined; before?: string | undefined },
): { items: VectorStoreObject[]; hasMore: boolean } | undefined {
  if (q.before !== undefined) {
    const end = items.findIndex((s) => s.id === q.before);
    if (end === -1) return undefined;
    const start = Math.max(0, end - q.limit);
    return { items: items.slice(start, end), hasMore: start > 0 };
  }
  const start = q.after === undefined ? 0 : items.findIndex((s) => s.id === q.after) + 1;
  if (start === 0 && q.after !== undefined) return undefined;
  return { items: items.slice(start, start + q.limit), hasMore: start + q.limit < items.length };
}

/** `GET /api/v1/llm/vector_stores/{id}`: the store; needs reader. */
export const getVectorStore = defineRoute({
  method: "GET",
  path: "/api/v1/llm/vector_stores/:id",
  operationId: "getVectorStore",
  summary: "A vector store (reader)",
  tag: TAG,
  permission: "vector_stores:read",
  responses: ok("The vector store", vectorStore),
  errors: ["not_found"],
  authorize: storeRole("reader"),
  handler: async ({ principal, params }, deps: VectorStoreRouteDeps) => {
    const found = await deps.vectorStores.store.get(principal.org, params.id!);
    if (!found) throw notFound(`No vector store ${params.id}`);
    return found;
  },
});

export const modifyVectorStoreBody = z.strictObject({
  name: name.nullable().optional(),
  expires_after: expiresAfter.nullable().optional(),
  metadata: storeMetadata.nullable().optional(),
});

/**
 * `POST /api/v1/llm/vector_stores/{id}` `{name, expires_after, metadata}` →
 * the store; needs writer. `expires_after: null` removes the expiry,
 * `metadata: null` clears it; the store is active now.
 */
export const modifyVectorStore = defineRoute({
  method: "POST",
  path: "/api/v1/llm/vector_stores/:id",
  operationId: "modifyVectorStore",
  summary: "Change a vector store's name, expiry or metadata (writer)",
  tag: TAG,
  permission: "vector_stores:write",
  body: modifyVectorStoreBody,
  bodyValidation: { prepare: (raw) => (raw === undefined ? {} : raw) },
  responses: ok("The vector store", vectorStore),
  errors: ["not_found"],
  authorize: storeRole("writer"),
  handler: async ({ principal, params, body }, deps: VectorStoreRouteDeps) => {
    const updated = await deps.vectorStores.store.update(principal.org, params.id!, {
      ...(body.name != null ? { name: body.name } : {}),
      ...(body.metadata !== undefined ? { metadata: body.metadata ?? {} } : {}),
      ...(body.expires_after !== undefined ? { expiresAfterDays: body.expires_after?.days ?? null } : {}),
    });
    if (!updated) throw notFound(`No vector store ${params.id}`);
    return updated;
  },
});

/**
 * `DELETE /api/v1/llm/vector_stores/{id}` → OpenAI's deleted object; needs
 * owner. Its relationships go first (guarded by the ownership when the
 * delete lands), then its chunks, then its records. Its files stay.
 */
export const deleteVectorStore = defineRoute({
  method: "DELETE",
  path: "/api/v1/llm/vector_stores/:id",
  operationId: "deleteVectorStore",
  summary: "Delete a vector store with its chunks and relationships (owner); its files stay",
  tag: TAG,
  permission: "vector_stores:write",
  responses: ok("Deleted", deletedSchema("vector_store.deleted")),
  errors: ["not_found"],
  authorize: storeRole("owner"),
  handler: async ({ principal, params }, deps: VectorStoreRouteDeps) => {
    const id = params.id!;
    if (!(await deps.vectorStores.store.get(principal.org, id))) throw notFound(`No vector store ${id}`);
    await deps.vectorStores.delete(principal, id);
    return { id, object: "vector_store.deleted", deleted: true };
  },
});
