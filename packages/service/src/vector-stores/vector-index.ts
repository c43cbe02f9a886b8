/**
 * The vector index: where the chunks of vector stores' files and their
 * embeddings are kept and searched. The search answers only with chunks of
 * files the caller may read, and still answers with as many as asked for
 * whenever that many readable ones exist (docs/adr/0020-vector-engine.md).
 * One implementation, `pgvector-index.ts` (PostgreSQL with pgvector); callers
 * depend on this interface.
 */
import type { AttributeFilter, Attributes } from "./attribute-filter.ts";

/** The widest embedding the index takes: pgvector's HNSW index indexes `vector` of up to 2,000 dimensions. */
export const MAX_EMBEDDING_DIMENSIONS = 2_000;
/** The most results one search returns (OpenAI's `max_num_results` stops at 50). */
export const MAX_SEARCH_RESULTS = 1_000;

/** A file in a vector store of an organization. */
export interface FileInStore {
  org: string;
  vectorStoreId: string;
  fileId: string;
}

/** One chunk of a file, as the ingestion made it. */
export interface ChunkInput {
  /** Its place in the file, from 0; unique within the file. */
  index: number;
  text: string;
  tokenCount: number;
  /** 1 to 2,000 finite numbers, not all zero (a cosine distance needs a direction); one width per file. */
  embedding: ArrayLike<number>;
}

/**
 * Which files the caller may read, decided at the time of the search:
 * - `files`: exactly these (all others are skipped inside the nearest-neighbour search);
 * - `decide`: asked, in bulk, about the files of each page of candidates in turn, closest first,
 *   and answering those of them the caller may read, until enough readable chunks are found.
 */
export type ReadableFiles =
  | { kind: "files"; fileIds: readonly string[] }
  | { kind: "decide"; decide(fileIds: readonly string[]): Promise<ReadonlySet<string>> };

export interface SearchRequest {
  org: string;
  /** One store, or several searched as one (a `file_search` tool's `vector_store_ids`). */
  vectorStoreIds: readonly string[];
  /** The query's embedding, of the width of the chunks it is to meet. */
  embedding: ArrayLike<number>;
  /** How many chunks to return, at most: exactly this many whenever as many readable ones match. 1 to 1,000. */
  limit: number;
  readable: ReadableFiles;
  /** OpenAI's attribute filter (comparison and compound shapes). */
  filter?: AttributeFilter;
  /** Chunks scoring less are left out (a `ranking_options.score_threshold`). */
  minScore?: number;
}

export interface SearchHit {
  vectorStoreId: string;
  fileId: string;
  chunkIndex: number;
  text: string;
  attributes: Attributes;
  tokenCount: number;
  /** Cosine similarity of the chunk's embedding to the query's, 1 for the same direction. */
  score: number;
}

/** Publishing found other than the chunks it was told were staged (another ingestion of the file published or discarded them). */
export class StagedChunksMismatch extends Error {
  constructor(expected: number, found: number) {
    super(`expected ${expected} staged chunks, found ${found}`);
    this.name = "StagedChunksMismatch";
  }
}

export interface VectorIndex {
  /** Brings the vector database's schema up to date; every other call does it first if it was not done. */
  prepare(): Promise<void>;
  /**
   * A file's chunks, all at once, in one transaction: its earlier chunks in the
   * store (and any staged ones) are replaced, so a search sees the old ones or the
   * new ones, never part. For files whose chunks fit in memory; larger ones `stage`.
   */
  replaceFile(file: FileInStore, chunks: readonly ChunkInput[], attributes: Attributes): Promise<void>;
  /** Chunks of one ingestion (`generation`) of a file, kept where no search reads them until `publish`. Any number of calls. */
  stage(file: FileInStore, generation: string, chunks: readonly ChunkInput[]): Promise<void>;
  /**
   * In one transaction: the `generation`'s staged chunks (exactly `expectedChunks` of them, else
   * `StagedChunksMismatch` and nothing changes) replace the file's chunks in the store, with `attributes`.
   */
  publish(
    file: FileInStore,
    generation: string,
    expectedChunks: number,
    attributes: Attributes,
  ): Promise<void>;
  /** Drops staged chunks of the file: one generation's, or all of them. */
  discardStaged(file: FileInStore, generation?: string): Promise<void>;
  /** Drops staged chunks older than `cutoff` (ingestions that died); how many. */
  discardStagedBefore(cutoff: Date): Promise<number>;
  /** The file's attributes in the store, on every chunk of it. */
  setAttributes(file: FileInStore, attributes: Attributes): Promise<void>;
  /** Removes the file from the store: its chunks, staged ones too. */
  deleteFile(file: FileInStore): Promise<void>;
  /** Removes the file from every store of its organization (the file was deleted or expired). */
  deleteFileEverywhere(org: string, fileId: string): Promise<void>;
  /** Removes every chunk of the store. */
  deleteStore(org: string, vectorStoreId: string): Promise<void>;
  /** The chunks nearest the query's embedding, closest first, of files the caller may read (see `SearchRequest`). */
  search(request: SearchRequest): Promise<SearchHit[]>;
  close(): Promise<void>;
}
