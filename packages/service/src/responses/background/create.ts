import { AppError, serviceUnavailable } from "@gw/core/errors";
import type { Caller } from "../../budgets/admit-model-call.ts";
import { releaseOwnership } from "../../calls/model-call.ts";
import { prepareTurn } from "../prepare-turn.ts";
import type { CreateResponseInput } from "../request.ts";
import { draftResponse } from "../response.ts";
import type { ResponseTurnDeps } from "../response-turn.ts";
import type { ResponseObject } from "../store.ts";
import type { BackgroundResponses } from "./index.ts";

/**
 * `background: true`: checks the request as a turn would (`prepareTurn`:
 * the model, the context and what it reads; nothing created), takes one of
 * the key's background slots (`BACKGROUND_RESPONSES_PER_KEY`: 429
 * `background_limit_exceeded` past it), stores the response `queued` and
 * owned by the principal, and queues it with the caller as the gateway
 * asserted it. Returns the queued response (the route answers it, or with
 * `stream: true` streams its events as the worker makes them).
 */
export async function createBackground(
  deps: ResponseTurnDeps & { background?: BackgroundResponses | undefined },
  caller: Caller,
  input: CreateResponseInput,
): Promise<ResponseObject> {
  const background = deps.background;
  if (!background)
    throw new AppError("bad_request", "Background mode is not enabled", { param: "background" });
  if (!input.store)
    throw new AppError("bad_request", "Background mode requires store: true", { param: "background" });
  if (input.tools?.some((t) => t.type === "mcp"))
    throw new AppError("bad_request", "Hosted MCP tools cannot run in background mode", { param: "tools" });
  const { principal } = caller;
  deps.provider.assertConfigured();
  const { model } = await prepareTurn(deps, principal, input, "writer");
  const id = deps.ids.newId("resp");
  if (!(await background.slots.take(principal.keyId, id)))
    throw new AppError(
      "background_limit_exceeded",
      `This API key has ${background.perKey} background responses in flight, its most; wait for one to end`,
    );
  const response: ResponseObject = {
    ...draftResponse(input, id, model, deps.clock.wall()),
    status: "queued",
    background: true,
  };
  const resource = { type: "response" as const, id };
  try {
    await deps.authorization.createOwnership(principal, resource);
    try {
      await deps.responses.saveQueued(principal.org, response);
    } catch (err) {
      await releaseOwnership(deps.authorization, principal, resource);
      throw err;
    }
  } catch (err) {
    await background.slots.give(principal.keyId, id);
    throw err;
  }
  try {
    await background.events.queued(response);
    // What the request read as it came in (its guardrail version) is not the worker's to reuse.
    const { guardrailVersion: _read, ...queued } = caller;
    await background.enqueue({ org: principal.org, responseId: id, caller: queued, input });
  } catch (err) {
    const error = { code: "server_error" as const, message: "The response could not be queued" };
    await deps.responses.updateBackground(principal.org, id, (r) => ({ ...r, status: "failed", error }));
    await background.slots.give(principal.keyId, id);
    throw serviceUnavailable("The response could not be queued; try again", err);
  }
  return response;
}
