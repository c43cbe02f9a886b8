import { defineRoute, type Route, type RouteInput, type RouteSpec } from "@gw/core/http";
import type { z } from "zod";
import type { Caller } from "../budgets/admit-model-call.ts";
import { CACHE_DIRECTIVES } from "../calls/response-cache.ts";
import { cacheHeaders, callerOf } from "./model-call.ts";

/** `X-Gateway-Cache` as a request sends it (docs/api/cache.md); any other value is 422. */
const CACHE_REQUEST_HEADER = {
  name: "X-Gateway-Cache",
  description:
    "`off`: the response cache is neither read nor written for this call; `refresh`: the model is asked again and its answer kept. Unset: the key's `cache` setting decides.",
  schema: { type: "string", enum: [...CACHE_DIRECTIVES] },
};

type Schema = z.ZodType;
type Parsed<S, Raw> = S extends z.ZodType ? z.output<S> : Raw;

/** What a model route's handler gets: the request's parsed parts, and who makes the model call. */
export type ModelRouteInput<P, Q, B> = RouteInput<
  Parsed<P, Record<string, string>>,
  Parsed<Q, Record<string, unknown>>,
  Parsed<B, unknown>
> & { caller: Caller };

/**
 * A route that calls a model (`callsModel: true`): the only kind whose
 * handler receives the `Caller` the model-call pipeline (`calls/model-call.ts`)
 * needs, so a route cannot call a model without being declared as one. The
 * OpenAPI document marks it (`x-gw-calls-model`), and the gateway reads its
 * model routes from there. `guardrails: true`: its calls are checked by the
 * organization's guardrails (`checkedByGuardrails`).
 */
export function modelRoute<
  D,
  P extends Schema | undefined = undefined,
  Q extends Schema | undefined = undefined,
  B extends Schema | undefined = undefined,
>(
  spec: Omit<RouteSpec<D, P, Q, B>, "callsModel" | "handler"> & {
    handler: (input: ModelRouteInput<P, Q, B>, deps: D) => unknown;
    guardrails?: boolean;
  },
): Route<D> {
  const { handler, guardrails, ...rest } = spec;
  const route = defineRoute<D, P, Q, B>({
    ...rest,
    headers: [...(rest.headers ?? []), CACHE_REQUEST_HEADER],
    // Every answer of a model route says what the response cache did, a refusal of the request too;
    // those it may answer say more.
    answerHeaders: { ...rest.answerHeaders, ...cacheHeaders("bypass") },
    callsModel: true,
    handler: (input, deps) => handler({ ...input, caller: callerOf(input.req, input.res) }, deps),
  });
  if (guardrails) guardrailed.add(route);
  return route;
}

const guardrailed = new WeakSet<object>();

/** Whether the route's model calls are checked by the organization's guardrails (declared `guardrails: true`). */
export const checkedByGuardrails = (route: object): boolean => guardrailed.has(route);
