import type { Caller } from "../budgets/admit-model-call.ts";
import type { Ids } from "../ids.ts";
import { type FileSearchCallItem, ID_PREFIX, type Item } from "../items/items.ts";
import type { ChatMessage } from "../llm/provider.ts";
import {
  searchVectorStores,
  type VectorSearchDeps,
  type VectorSearchResult,
} from "../vector-stores/search.ts";
import { DEFAULT_NUM_RESULTS } from "../vector-stores/search-request.ts";
import type { FileSearchToolInput } from "./request.ts";

/** OpenAI's `file_citation` annotation of an output text. */
export interface FileCitation {
  type: "file_citation";
  file_id: string;
  filename: string;
  /** Where in the text the citation stands: its end (the answer as a whole draws on the file). */
  index: number;
}

/** A `file_search` tool's search, done: its output item, what the model is given, the files to cite. */
export interface FileSearchRun {
  item: FileSearchCallItem;
  /** Added to the model's messages after the turn's input. */
  messages: ChatMessage[];
  /** One per file the model was given chunks of, best first. */
  citations: Omit<FileCitation, "index">[];
}

/** The text a turn searches for: its last user message (OpenAI's model writes its own queries; here the user's words are the query). */
export function fileSearchQuery(turn: Item[]): string | undefined {
  for (let i = turn.length - 1; i >= 0; i--) {
    const item = turn[i]!;
    if (item.type !== "message" || item.role !== "user") continue;
    const text = item.content
      .map((part) => part.text)
      .join("\n")
      .trim();
    if (text) return text.slice(0, 4_096);
  }
  return undefined;
}

/** The results as the model reads them: each chunk with the file it came from. */
function contextMessage(query: string, results: VectorSearchResult[]): ChatMessage {
  if (results.length === 0)
    return {
      role: "system",
      content: `File search for "${query}" found nothing in the files the user may read.`,
    };
  const chunks = results.map(
    (r) =>
      `<result file_id="${r.fileId}" filename="${r.filename.replaceAll('"', "'")}" score="${r.score.toFixed(3)}">\n${r.text}\n</result>`,
  );
  return {
    role: "system",
    content: `File search results for "${query}", from files the user may read. Answer from them where they help, naming the files you use.\n${chunks.join("\n")}`,
  };
}

/**
 * Runs a response's `file_search` tool before its model call, as the
 * principal and with the rules of `searchVectorStores` (reader on every
 * store, only chunks of files readable now, the query's embedding charged to
 * the key): the `file_search_call` item (with `results` only when `include`
 * names `file_search_call.results`), the chunks for the model, and the
 * files to cite. A turn without a user message searches nothing.
 */
export async function runFileSearch(
  deps: VectorSearchDeps & { ids: Ids },
  caller: Caller,
  tool: FileSearchToolInput,
  turn: Item[],
  includeResults: boolean,
  signal: AbortSignal,
): Promise<FileSearchRun> {
  const query = fileSearchQuery(turn);
  const item: FileSearchCallItem = {
    type: "file_search_call",
    id: deps.ids.newId(ID_PREFIX.file_search_call),
    status: "completed",
    queries: query === undefined ? [] : [query],
    results: includeResults ? [] : null,
  };
  if (query === undefined) return { item, messages: [], citations: [] };
  const results = await searchVectorStores(
    deps,
    caller,
    {
      vectorStoreIds: tool.vector_store_ids,
      queries: [query],
      maxResults: tool.max_num_results ?? DEFAULT_NUM_RESULTS,
      filter: tool.filters ?? undefined,
      scoreThreshold: tool.ranking_options?.score_threshold,
    },
    signal,
  );
  if (includeResults)
    item.results = results.map((r) => ({
      file_id: r.fileId,
      filename: r.filename,
      score: r.score,
      attributes: { ...r.attributes },
      text: r.text,
    }));
  const cited = new Map<string, string>();
  for (const r of results) if (!cited.has(r.fileId)) cited.set(r.fileId, r.filename);
  return {
    item,
    messages: [contextMessage(query, results)],
    citations: [...cited].map(([file_id, filename]) => ({ type: "file_citation", file_id, filename })),
  };
}

/** The citations placed on an answer's text: at its end. */
export const citationsFor = (run: FileSearchRun | undefined, text: string): FileCitation[] =>
  (run?.citations ?? []).map((c) => ({ ...c, index: text.length }));
