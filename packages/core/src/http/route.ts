import type { Request, RequestHandler, Response, Router } from "express";
import type { z } from "zod";
import { forbidden } from "../errors.ts";
import type { ApiOperation } from "../openapi.ts";
import type { Permission } from "../permissions.ts";
import type { Principal } from "../principal.ts";
import { validate, validateAsync } from "../validation.ts";
import { principalOf } from "./principal.ts";

type Schema = z.ZodType;
/** What a declared schema parses to, or `Raw` when the route declares none. */
type Parsed<S, Raw> = S extends z.ZodType ? z.output<S> : Raw;

/** What a route's handler gets: the principal and its request's parts, parsed by the declared schemas. */
export interface RouteInput<P = Record<string, string>, Q = Record<string, unknown>, B = unknown> {
  principal: Principal;
  params: P;
  query: Q;
  body: B;
  req: Request;
  res: Response;
}

/**
 * How a body is validated when it is not simply by `body`: `prepare` reads
 * the raw body first (e.g. drops `null`s), `schemaFor` gives the schema as
 * the deployment configures it (`body` is then what the document shows),
 * `async` for schemas with asynchronous checks, `byHandler` when the
 * handler validates the body itself because its schema needs what the
 * handler looks up first (the handler gets the raw body).
 */
export interface BodyValidation<D> {
  prepare?: (raw: unknown) => unknown;
  schemaFor?: (deps: D) => Schema;
  async?: boolean;
  byHandler?: boolean;
}

/**
 * One route, declared once: what the OpenAPI document says of it (an
 * `ApiOperation`: the path with its mount, e.g. `/api/v1/llm/conversations/:id`),
 * the key permission it requires (one, or any of several), its request
 * schemas (the handler receives what they parse to), whether it calls a
 * model, and its handler. A handler answers by returning a JSON value, or by
 * writing `res` itself (streams, 204s) and returning nothing.
 */
export interface RouteSpec<
  D,
  P extends Schema | undefined = undefined,
  Q extends Schema | undefined = undefined,
  B extends Schema | undefined = undefined,
> extends Omit<ApiOperation, "params" | "query" | "body" | "permission" | "deprecated"> {
  /** The key permission the route requires; a list: any of them. */
  permission?: Permission | readonly Permission[];
  /** A deprecated route: the headers every answer of it carries (RFC 9745 `Deprecation`…). */
  deprecated?: { headers: Record<string, string> };
  /**
   * Headers every answer of the route carries, set before anything is checked (so a refusal has them
   * too); the handler may set another value.
   */
  answerHeaders?: Record<string, string>;
  /**
   * Whether the route calls a model (its requests are model requests for
   * budgets and rate limits). The service lets such a request's body be
   * parsed and validated while its replay guard is answered: nothing before
   * the handler may act.
   */
  callsModel?: boolean;
  params?: P;
  query?: Q;
  body?: B;
  bodyValidation?: BodyValidation<D>;
  /** The handler reads `req.query` itself (it is lenient where the schema is not): `query` only documents it. */
  queryValidation?: { byHandler: true };
  /**
   * A check before the request's parts are validated (a resource role the
   * route needs, asked of SpiceDB): who may not touch the resource learns
   * nothing more from a 422. It sees the raw path parameters. It runs, like
   * validation, before a check the door left in flight (`res.locals.firstUse`,
   * a model call's replay guard) has answered: it must not act (write,
   * spend, call out).
   */
  authorize?: (input: { principal: Principal; params: Record<string, string> }, deps: D) => Promise<void>;
  handler: (
    input: RouteInput<
      Parsed<P, Record<string, string>>,
      Parsed<Q, Record<string, unknown>>,
      Parsed<B, unknown>
    >,
    deps: D,
  ) => unknown;
}

/** A declared route: its operation for the document, and how it is registered with its dependencies. */
export interface Route<D = never> extends ApiOperation {
  callsModel: boolean;
  /** Registers the route on `router`, mounted at `mount` (`API_PREFIX`, or `""` for a router at the root). */
  register: (router: Router, deps: D, mount?: string) => void;
}

/** The text the document shows for a route's permission. */
const permissionText = (permission: Permission | readonly Permission[] | undefined) =>
  permission === undefined
    ? undefined
    : typeof permission === "string"
      ? permission
      : permission.join(" or ");

/** Endpoint-level check: the credential must carry `permission`, or one of the listed ones. */
export function requireAnyPermission(permission: Permission | readonly Permission[]): RequestHandler {
  const needed: readonly Permission[] = typeof permission === "string" ? [permission] : permission;
  const named = needed.map((p) => `'${p}'`).join(" or ");
  return (_req, res, next) => {
    const held = principalOf(res).permissions;
    if (!needed.some((p) => held.includes(p))) {
      throw forbidden(`This credential lacks the ${named} permission`, { reason: "missing_permission" });
    }
    next();
  };
}

/** Declares a route; see `RouteSpec`. Its dependencies' type is the handler's second parameter's. */
export function defineRoute<
  D,
  P extends Schema | undefined = undefined,
  Q extends Schema | undefined = undefined,
  B extends Schema | undefined = undefined,
>(spec: RouteSpec<D, P, Q, B>): Route<D> {
  const {
    handler,
    bodyValidation,
    queryValidation,
    authorize,
    callsModel,
    deprecated,
    answerHeaders,
    permission,
    ...operation
  } = spec;
  return {
    ...(operation as Omit<ApiOperation, "permission" | "deprecated">),
    ...(permission === undefined ? {} : { permission: permissionText(permission) }),
    ...(deprecated ? { deprecated: true } : {}),
    callsModel: callsModel ?? false,
    register(router, deps, mount = API_PREFIX) {
      const steps: RequestHandler[] = [];
      const headers = { ...deprecated?.headers, ...answerHeaders };
      if (Object.keys(headers).length > 0) {
        steps.push((_req, res, next) => {
          res.set(headers);
          next();
        });
      }
      if (permission !== undefined) steps.push(requireAnyPermission(permission));
      const bodySchema = bodyValidation?.schemaFor?.(deps) ?? spec.body;
      steps.push(async (req, res) => {
        if (authorize)
          await authorize(
            { principal: principalOf(res), params: req.params as Record<string, string> },
            deps,
          );
        const params = spec.params ? validate("path", spec.params, req.params) : req.params;
        const query =
          spec.query && !queryValidation?.byHandler ? validate("query", spec.query, req.query) : req.query;
        const raw = bodyValidation?.prepare ? bodyValidation.prepare(req.body) : req.body;
        const body =
          !bodySchema || bodyValidation?.byHandler
            ? raw
            : bodyValidation?.async
              ? await validateAsync("body", bodySchema, raw)
              : validate("body", bodySchema, raw);
        const input = {
          // A public route (`auth: "none"`) has no principal: asking for it fails loudly.
          get principal() {
            return principalOf(res);
          },
          params,
          query,
          body,
          req,
          res,
        } as Parameters<typeof handler>[0];
        // Nothing acts on a request before its door's check has answered (it overlapped parsing and validation).
        await res.locals.firstUse;
        const answer = await handler(input, deps);
        if (answer !== undefined) res.json(answer);
      });
      const path = mountedPath(operation.path, mount);
      router[operation.method.toLowerCase() as "get" | "post" | "put" | "patch" | "delete"](path, ...steps);
    },
  };
}

/** The mount path every declared route's path starts with; routers are mounted there. */
export const API_PREFIX = "/api/v1";

const mountedPath = (path: string, mount: string) => {
  if (!path.startsWith(`${mount}/`))
    throw new Error(`A route registered at ${mount} must be under it: ${path}`);
  return path.slice(mount.length);
};

/** Registers every route on `router` (mounted at `mount`, `API_PREFIX` by default), in order. */
export function registerRoutes<D>(
  router: Router,
  routes: readonly Route<D>[],
  deps: D,
  mount: string = API_PREFIX,
): void {
  for (const route of routes) route.register(router, deps, mount);
}

/** The routes as the OpenAPI document describes them, with the `x-` extensions `extensionsOf` gives each. */
export function operationsOf<R extends Route<never>>(
  routes: readonly R[],
  extensionsOf: (route: R) => Record<`x-${string}`, unknown> = () => ({}),
): ApiOperation[] {
  return routes.map(({ register: _register, callsModel: _callsModel, ...operation }, i) => {
    const extensions = extensionsOf(routes[i]!);
    return Object.keys(extensions).length ? { ...operation, extensions } : operation;
  });
}
