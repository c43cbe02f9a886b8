/**
 * Search over vector stores that answers only with chunks of files the
 * caller may read at that moment (docs/adr/0021-vector-stores.md#search): the
 * one function the search route and the Responses `file_search` tool call.
 *
 * - The caller needs reader on every store searched (else 404, as for a store
 *   that does not exist, of another organization, or expired).
 * - The queries are embedded through the model-call pipeline, charged to the
 *   caller's key, with the model the stores' files were embedded with.
 * - The index fetches the nearest chunks a page at a time; the files of each
 *   page are decided in one bulk call (SpiceDB's CheckBulkPermissions, as fresh
 *   as the organization's last write through the gateway or the service, so a
 *   revoke or an expiry a moment ago counts) together with the file records
 *   that are still live (an expired file is gone at once, before any sweep),
 *   until `maxResults` readable chunks are found or none are left.
 * Nothing is cached between searches: a revoke takes effect on the next one,
 * without re-indexing.
 */
import type { ResourceAuthorization } from "@gw/core/authz";
import { notFound, serviceUnavailable } from "@gw/core/errors";
import type { Principal } from "@gw/core/principal";
import type { Caller } from "../budgets/admit-model-call.ts";
import type { AttributeFilter, Attributes } from "./attribute-filter.ts";
import { type Embedder, EmbeddingsUnavailable } from "./ingestion/embedder.ts";
import type { SearchHit, VectorIndex } from "./vector-index.ts";

/** Where a search learns which stores exist (the records, not the roles). */
export interface SearchableStores {
  /** The stores among `ids` that exist in `org` and have not expired, marked active by the search; the others are left out. */
  searchable(org: string, ids: readonly string[]): Promise<string[]>;
}

/** The live files among `ids` (complete and not expired), with their names. */
export interface FileNames {
  getMany(org: string, ids: string[]): Promise<{ id: string; filename: string }[]>;
}

export interface VectorSearchDeps {
  authorization: ResourceAuthorization;
  files: FileNames;
  vectorIndex: VectorIndex;
  vectorStores: SearchableStores;
  /** Embeds the queries through the model-call pipeline, charged to the caller's key. */
  embedder: Embedder;
  /** The model the stores' files were embedded with (`VECTOR_STORE_EMBEDDING_MODEL`): the queries are embedded with it too. */
  embeddingModel: string;
}

export interface VectorSearch {
  vectorStoreIds: readonly string[];
  /** One query or several: a chunk found by several counts once, with its best score. */
  queries: readonly string[];
  /** 1 to 50. */
  maxResults: number;
  filter?: AttributeFilter | undefined;
  /** Chunks scoring less (cosine similarity, 0 to 1) are left out. */
  scoreThreshold?: number | undefined;
}

export interface VectorSearchResult {
  vectorStoreId: string;
  fileId: string;
  filename: string;
  chunkIndex: number;
  score: number;
  attributes: Attributes;
  text: string;
}

/**
 * Whether the principal may read each file, decided in bulk: reader in
 * SpiceDB (one CheckBulkPermissions) and a live file record (one query),
 * both asked at once. Decisions are kept for this search only, so a file met
 * again in a later page (or by another query) is not asked twice.
 */
export class FileReadDecisions {
  private readonly names = new Map<string, string | undefined>();
  private readonly deps: Pick<VectorSearchDeps, "authorization" | "files">;
  private readonly principal: Principal;

  constructor(deps: Pick<VectorSearchDeps, "authorization" | "files">, principal: Principal) {
    this.deps = deps;
    this.principal = principal;
  }

  /** The files among `fileIds` the principal may read now. */
  async decide(fileIds: readonly string[]): Promise<ReadonlySet<string>> {
    const undecided = [...new Set(fileIds)].filter((id) => !this.names.has(id));
    if (undecided.length > 0) {
      const [allowed, live] = await Promise.all([
        this.deps.authorization.checkAll(
          this.principal,
          undecided.map((id) => ({ resource: { type: "file" as const, id }, role: "reader" as const })),
        ),
        this.deps.files.getMany(this.principal.org, undecided),
      ]);
      const filenames = new Map(live.map((f) => [f.id, f.filename]));
      for (const [i, id] of undecided.entries())
        this.names.set(id, allowed[i] ? filenames.get(id) : undefined);
    }
    return new Set(fileIds.filter((id) => this.names.get(id) !== undefined));
  }

  /** The name of a file decided readable. */
  filename(fileId: string): string {
    return this.names.get(fileId) ?? "";
  }
}

/**
 * The stores the principal may search, in the order asked: reader on each
 * (one bulk check) and a live record of each; any other is a 404 naming it.
 */
export async function searchableStores(
  deps: Pick<VectorSearchDeps, "authorization" | "vectorStores">,
  principal: Principal,
  ids: readonly string[],
): Promise<string[]> {
  const unique = [...new Set(ids)];
  const readers = await deps.authorization.checkAll(
    principal,
    unique.map((id) => ({ resource: { type: "vector_store" as const, id }, role: "reader" as const })),
  );
  const refused = unique.find((_, i) => !readers[i]);
  if (refused !== undefined) throw notFound(`No vector store ${refused}`);
  // Only now: asking for the records marks the stores active (their expiry moves), which only a reader may do.
  const live = new Set(await deps.vectorStores.searchable(principal.org, unique));
  const gone = unique.find((id) => !live.has(id));
  if (gone !== undefined) throw notFound(`No vector store ${gone}`);
  return unique;
}

const hitKey = (hit: SearchHit) => `${hit.vectorStoreId}\u0000${hit.fileId}\u0000${hit.chunkIndex}`;

/**
 * The `maxResults` chunks of the stores nearest the queries, of files the
 * caller may read now, best first (see the module's comment). Throws 404 for
 * a store the caller may not read or that does not exist.
 */
export async function searchVectorStores(
  deps: VectorSearchDeps,
  caller: Caller,
  search: VectorSearch,
  signal: AbortSignal,
): Promise<VectorSearchResult[]> {
  const { principal } = caller;
  const vectorStoreIds = await searchableStores(deps, principal, search.vectorStoreIds);
  const decisions = new FileReadDecisions(deps, principal);
  const embedded = await deps.embedder
    .embed({ caller, model: deps.embeddingModel, texts: [...search.queries] }, signal)
    .catch((err: unknown) => {
      throw err instanceof EmbeddingsUnavailable ? serviceUnavailable(err.message, err) : err;
    });
  const best = new Map<string, SearchHit>();
  for (const embedding of embedded.vectors) {
    const hits = await deps.vectorIndex.search({
      org: principal.org,
      vectorStoreIds,
      embedding,
      limit: search.maxResults,
      readable: { kind: "decide", decide: (fileIds) => decisions.decide(fileIds) },
      ...(search.filter ? { filter: search.filter } : {}),
      ...(search.scoreThreshold !== undefined ? { minScore: search.scoreThreshold } : {}),
    });
    for (const hit of hits) {
      const key = hitKey(hit);
      const kept = best.get(key);
      if (!kept || hit.score > kept.score) best.set(key, hit);
    }
  }
  return [...best.values()]
    .sort((a, b) => b.score - a.score || (hitKey(a) < hitKey(b) ? -1 : hitKey(a) > hitKey(b) ? 1 : 0))
    .slice(0, search.maxResults)
    .map((hit) => ({
      vectorStoreId: hit.vectorStoreId,
      fileId: hit.fileId,
      filename: decisions.filename(hit.fileId),
      chunkIndex: hit.chunkIndex,
      score: Math.max(0, Math.min(1, hit.score)),
      attributes: hit.attributes,
      text: hit.text,
    }));
}
