import { type JsonSchema, objectSchema, stringSchema } from "@gw/core/openapi";
import { z } from "zod";
import { metadata, nullable, unixTime } from "../../http/schemas.ts";
import { pageLimit } from "../../pagination.ts";
import { byType, notSupported } from "../../schema.ts";
import type { Attributes } from "../attribute-filter.ts";
import { AUTO_CHUNKING, type Chunking, FILE_STATUSES } from "../store.ts";
import type { FileSpec } from "../vector-stores.ts";

// --- requests ---

/** PostgreSQL's jsonb and text cannot hold U+0000. */
const NO_NUL = { message: "Text must not contain U+0000", params: { type: "value_error" } } as const;
const text = (max: number) =>
  z
    .string()
    .max(max)
    .refine((v) => !v.includes("\u0000"), NO_NUL);

/** OpenAI's metadata: up to 16 pairs, keys up to 64 characters, values up to 512. */
export const storeMetadata = z
  .record(text(64), text(512))
  .refine((m) => Object.keys(m).length <= 16, "Metadata should have at most 16 pairs");

/** OpenAI's attributes of a file in a store: up to 16 keys of up to 64 characters; strings up to 512, numbers, booleans. */
export const attributes = z
  .record(text(64), z.union([text(512), z.number().finite(), z.boolean()]))
  .refine((a) => Object.keys(a).length <= 16, "Attributes should have at most 16 keys");

const staticChunking = z.strictObject({
  type: z.literal("static"),
  static: z
    .strictObject({
      max_chunk_size_tokens: z.int().min(100).max(4096),
      chunk_overlap_tokens: z.int().min(0),
    })
    .refine((s) => s.chunk_overlap_tokens <= s.max_chunk_size_tokens / 2, {
      message: "chunk_overlap_tokens must not exceed half of max_chunk_size_tokens",
      path: ["chunk_overlap_tokens"],
      params: { type: "value_error" },
    }),
});

/** OpenAI's `auto` (800 and 400) or `static` chunking strategy. */
export const chunkingStrategy = byType("Chunking strategy", {
  auto: z.strictObject({ type: z.literal("auto") }),
  static: staticChunking,
});

export type ChunkingStrategy = z.output<typeof chunkingStrategy>;

export const chunkingOf = (strategy: ChunkingStrategy | undefined): Chunking =>
  strategy?.type === "static"
    ? {
        maxChunkSizeTokens: strategy.static.max_chunk_size_tokens,
        chunkOverlapTokens: strategy.static.chunk_overlap_tokens,
      }
    : AUTO_CHUNKING;

export const expiresAfter = z.strictObject({
  anchor: z.literal("last_active_at"),
  days: z.int().min(1).max(365),
});

export const fileId = z.string().min(1).max(256);

/** `files[]` of a batch, and the body of `POST /vector_stores/{id}/files`. */
export const fileSpec = z.strictObject({
  file_id: fileId,
  attributes: attributes.nullable().optional(),
  chunking_strategy: chunkingStrategy.optional(),
});

export const specOf = (
  id: string,
  attrs: Attributes | null | undefined,
  strategy: ChunkingStrategy | undefined,
): FileSpec => ({ fileId: id, attributes: attrs ?? {}, chunking: chunkingOf(strategy) });

/** A list's query, as OpenAI's vector store lists take it: `limit` 1 to 100 (default 20), `order`, `after`, `before`. */
export const listQuery = z.object({
  limit: pageLimit(100, 20),
  order: z.enum(["asc", "desc"]).default("desc"),
  after: z.string().min(1).max(256).optional(),
  before: z.string().min(1).max(256).optional(),
});

export const fileListQuery = listQuery.extend({
  filter: z.enum(FILE_STATUSES).optional(),
  include: notSupported("include"),
});

// --- answers, as the OpenAPI document shows them ---

const fileCounts = objectSchema({
  in_progress: { type: "integer" },
  completed: { type: "integer" },
  failed: { type: "integer" },
  cancelled: { type: "integer" },
  total: { type: "integer" },
});

const attributesSchema: JsonSchema = {
  type: "object",
  additionalProperties: { type: ["string", "number", "boolean"] },
};

/** OpenAI's `VectorStoreObject`. */
export const vectorStore = objectSchema(
  {
    id: stringSchema("`vs_…`"),
    object: { type: "string", const: "vector_store" },
    created_at: unixTime,
    name: stringSchema(),
    usage_bytes: { type: "integer", description: "Bytes of the store's chunks: their text and embeddings" },
    file_counts: fileCounts,
    status: { enum: ["expired", "in_progress", "completed"] },
    expires_after: objectSchema({
      anchor: { type: "string", const: "last_active_at" },
      days: { type: "integer", minimum: 1, maximum: 365 },
    }),
    expires_at: nullable("integer"),
    last_active_at: unixTime,
    metadata,
  },
  { optional: ["expires_after"] },
);

/** OpenAI's `VectorStoreFileObject`. */
export const vectorStoreFile = objectSchema({
  id: stringSchema("The file's id"),
  object: { type: "string", const: "vector_store.file" },
  usage_bytes: { type: "integer" },
  created_at: unixTime,
  vector_store_id: stringSchema(),
  status: { enum: [...FILE_STATUSES] },
  last_error: {
    anyOf: [
      objectSchema({
        code: { enum: ["server_error", "unsupported_file", "invalid_file"] },
        message: stringSchema(),
      }),
      { type: "null" },
    ],
  },
  chunking_strategy: objectSchema({
    type: { type: "string", const: "static" },
    static: objectSchema({
      max_chunk_size_tokens: { type: "integer" },
      chunk_overlap_tokens: { type: "integer" },
    }),
  }),
  attributes: attributesSchema,
});

/** OpenAI's `VectorStoreFileBatchObject`. */
export const fileBatch = objectSchema({
  id: stringSchema("`vsfb_…`"),
  object: { type: "string", const: "vector_store.files_batch" },
  created_at: unixTime,
  vector_store_id: stringSchema(),
  status: { enum: ["in_progress", "completed", "cancelled", "failed"] },
  file_counts: fileCounts,
});

/** OpenAI's list object of `items`. */
export const listOf = (items: JsonSchema) =>
  objectSchema({
    object: { type: "string", const: "list" },
    data: { type: "array", items },
    first_id: nullable("string"),
    last_id: nullable("string"),
    has_more: { type: "boolean" },
  });
