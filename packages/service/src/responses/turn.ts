import { AppError } from "@gw/core/errors";
import type { Caller } from "../budgets/admit-model-call.ts";
import { admitCall } from "../calls/model-call.ts";
import type { Item } from "../items/items.ts";
import { citationsFor, type FileSearchRun, runFileSearch } from "./file-search.ts";
import { startHostedTurn } from "./hosted-mcp.ts";
import { prepareTurn } from "./prepare-turn.ts";
import type { CreateResponseInput } from "./request.ts";
import { draftResponse, outputOf, settle } from "./response.ts";
import { keep, type ResponseTurn, type ResponseTurnDeps, recordTurnUsage } from "./response-turn.ts";
import type { OutputItem, ResponseObject } from "./store.ts";
import type { StreamedTurn } from "./stream.ts";

/**
 * A background response's turn (responses/background): the response was
 * stored and owned when it was queued, so it keeps its id and is kept by
 * `keep` (an update of that row) instead of being created.
 */
export interface BackgroundTurn {
  response: ResponseObject;
  keep(response: ResponseObject, turn: Item[]): Promise<void>;
}

/**
 * One turn with the model. The principal owns the new `resp_…` id (unless
 * `store` is false: then nothing is kept). Earlier context comes from a
 * `conversation` (writer needed; the turn is appended to it) or from
 * `previous_response_id` (reader needed, else 404 as for an unknown id): its
 * newest items that fit the context budget. Token and spend budgets are
 * reserved here, before the model is called, and settled once with what it
 * used. Usage is recorded only for answered responses.
 */
export async function startTurn(
  deps: ResponseTurnDeps,
  caller: Caller,
  input: CreateResponseInput,
  background?: BackgroundTurn,
): Promise<ResponseTurn> {
  const { principal } = caller;
  const fileSearch = input.tools?.find((t) => t.type === "file_search");
  if (input.tools?.some((t) => t.type === "mcp")) {
    if (fileSearch)
      throw new AppError(
        "bad_request",
        "A file_search tool and hosted MCP tools in one request are not supported",
        {
          param: "tools",
        },
      );
    if (!deps.hostedMcp)
      throw new AppError("bad_request", "Hosted MCP tools are not configured", { param: "tools" });
    return startHostedTurn({ ...deps, hostedMcp: deps.hostedMcp }, caller, input);
  }
  deps.provider.assertConfigured();
  const { model, turn, request, reads } = await prepareTurn(deps, principal, input, "writer");
  const response = background
    ? { ...background.response, status: "in_progress" as const, model }
    : draftResponse(input, deps.ids.newId("resp"), model, deps.clock.wall());
  // The search runs before admission, so the chunks it gives the model are counted in the prompt admitted.
  const searched: FileSearchRun | undefined = fileSearch
    ? await runFileSearch(
        deps,
        caller,
        fileSearch,
        turn,
        input.include?.includes("file_search_call.results") === true,
        new AbortController().signal,
      )
    : undefined;
  if (searched) request.messages = [...request.messages, ...searched.messages];
  const call = await admitCall<ResponseObject, StreamedTurn>(deps, {
    caller,
    request,
    owned: input.store && !background ? { type: "response", id: response.id } : undefined,
    keep: async (completion, streamed) => {
      settle(
        response,
        completion,
        streamed
          ? streamed.output
          : withFileSearch(searched, outputOf(completion, deps.ids, response.max_tool_calls)),
        deps.clock.wall(),
      );
      if (background) {
        await Promise.all([
          background.keep(response, turn),
          recordTurnUsage(deps, principal, response, completion),
        ]);
      } else await keep(deps, principal, response, input, turn, completion);
      return response;
    },
    // A response alone can be taken back; a turn appended to a conversation is kept once it is owned.
    ...(input.conversation || background
      ? {}
      : { discard: () => deps.responses.delete(principal.org, response.id) }),
    // Stored context keeps the answer to its principal, and a change of who may read it to a fresh one.
    // A background response is never answered from the cache nor kept in it.
    ...(input.background || background
      ? {}
      : {
          reads: {
            resources: [
              ...reads,
              ...(fileSearch?.vector_store_ids ?? []).map((id) => ({ type: "vector_store" as const, id })),
            ],
            stored: reads.length > 0 || fileSearch !== undefined,
          },
        }),
  });
  return {
    windows: call.windows,
    cache: call.cache,
    response,
    request,
    provider: call.provider,
    redactedBy: () => call.redactedBy(),
    answer: (signal) => call.answer(signal),
    stream: (start, signal) => call.stream(start, signal),
    ...(searched ? { fileSearch: searched } : {}),
  };
}

/** The output of a turn that searched files: its `file_search_call` first, the answer's text citing the files. */
function withFileSearch(searched: FileSearchRun | undefined, output: OutputItem[]): OutputItem[] {
  if (!searched) return output;
  for (const item of output)
    if (item.type === "message")
      for (const part of item.content)
        if (part.type === "output_text") part.annotations = citationsFor(searched, part.text);
  return [searched.item, ...output];
}
