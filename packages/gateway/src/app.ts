import type { AuditLog } from "@gw/core/audit";
import type { ResourceAuthorization, SpiceDBClient } from "@gw/core/authz";
import type { Clock } from "@gw/core/clock";
import {
  CACHE_HEADER,
  errorHandler,
  jsonBody,
  type MetricsEndpoint,
  notFoundHandler,
  RouteLabels,
  registerProbes,
  registerRoutes,
  requirePermission,
  useRequestBasics,
} from "@gw/core/http";
import type { Limits } from "@gw/core/limits";
import type { Logger } from "@gw/core/logger";
import type { KeyOwners } from "@gw/core/on-behalf-of";
import { type RedisClient, redisReady } from "@gw/core/redis";
import { CountingWindows } from "@gw/core/windows";
import express, { Router } from "express";
import { recordLastUsed } from "./api-keys/last-used.ts";
import type { ApiKeyLookup } from "./api-keys/lookup.ts";
import type { OrgLimitsStore } from "./api-keys/org-limits.ts";
import type { ApiKeyStore } from "./api-keys/store.ts";
import { authenticate } from "./authenticate/authenticate.ts";
import { createConsoleRouter } from "./console/console-router.ts";
import type { ConsoleSessions } from "./console/sessions.ts";
import type { SignInLimits } from "./console/sign-in-limits.ts";
import { crossOriginForMcpClients } from "./cross-origin.ts";
import { type ForwardOptions, forward } from "./forward/forward.ts";
import { MODEL_ROUTES, SERVICE_ROUTES } from "./forward/service-routes.ts";
import type { McpDeps } from "./mcp/deps.ts";
import { mcpProxy } from "./mcp/proxy.ts";
import type { GatewayMetrics } from "./metrics.ts";
import { type AuthorizationServerDeps, authorizationServer } from "./oauth/authorization-server.ts";
import type { RevokedFamilies } from "./oauth/revoked-families.ts";
import { requireApiKey, resolvePrincipal } from "./principal/resolve-principal.ts";
import { rateLimit } from "./rate-limit/rate-limit.ts";
import type { RequestWindows } from "./rate-limit/request-windows.ts";
import type { LookupCursors } from "./routes/authorization/lookup-cursor.ts";
import {
  adminReadRoutes,
  apiKeyRoutes,
  authenticationRoutes,
  authorizationRoutes,
  mcpRoutes,
  wellKnownRoutes,
} from "./routes/index.ts";
import type { TokenService } from "./tokens/tokens.ts";

export interface GatewayDeps {
  logger: Logger;
  metrics: GatewayMetrics;
  /** The process's one clock. */
  clock: Clock;
  redis: RedisClient;
  store: ApiKeyStore;
  keys: ApiKeyLookup;
  /** Who owns the organizations' keys, whom no other key acts for unless its policy names them. */
  keyOwners: KeyOwners;
  spicedb: SpiceDBClient;
  limiter: RequestWindows;
  tokens: TokenService;
  /** The gateway's public URL: tokens addressed to it are accepted as credentials. */
  publicUrl: string;
  forward: ForwardOptions;
  defaultLimits: Limits;
  /** Organizations' default limits for the end users of their keys. */
  orgLimits: OrgLimitsStore;
  authorization: ResourceAuthorization;
  audit: AuditLog;
  /** Longest lifetime of an expiring grant, in seconds. */
  grantMaxTtlSeconds: number;
  /** Signs and opens the `next_cursor` of lookups. */
  lookupCursors: LookupCursors;
  /** Where `/metrics` is served, and its token. */
  metricsEndpoint?: MetricsEndpoint;
  /** Sessions of the admin console under `/admin/`; without them the console is not served. */
  consoleSessions?: ConsoleSessions;
  /** The console's limits on failed sign-ins; needed with `consoleSessions`. */
  consoleSignInLimits?: SignInLimits;
  /** The OAuth authorization server for MCP clients; without it the gateway serves none. */
  oauth?: Omit<
    AuthorizationServerDeps,
    "publicUrl" | "tokens" | "keys" | "mcp" | "signInLimits" | "keyOwners" | "metrics" | "logger" | "clock"
  > & {
    /** Revoked authorizations: every route that accepts tokens refuses theirs. */
    revokedFamilies: RevokedFamilies;
  };
  /** Registered MCP servers, their vault and the proxy. */
  mcp: Omit<McpDeps, "authorization" | "audit" | "metrics" | "logger" | "publicUrl">;
}

/**
 * The request's path through the gateway: basics (request id, logs, body
 * parsing) → authenticate → principal → rate limit → forward to the service, or the
 * route's permission → the route (authorization routes ask SpiceDB).
 */
/** The service's model routes, matched by method and path. */
const modelRoutes = new RouteLabels(MODEL_ROUTES);

export function createGatewayApp(deps: GatewayDeps): express.Express {
  const app = express();
  useRequestBasics(app, deps.logger, deps.metrics, SERVICE_ROUTES, "info", crossOriginForMcpClients);
  // Every answer of a model route says what the response cache did, the gateway's own refusals (401,
  // 403, 429) too: `bypass`, unless the service, which answers the rest, says more.
  app.use("/api/v1/llm", (req, res, next) => {
    if (modelRoutes.label(req.method, req.originalUrl) !== "unmatched") res.setHeader(CACHE_HEADER, "bypass");
    next();
  });

  const probes = Router();
  registerProbes(
    probes,
    {
      redis: () => redisReady(deps.redis),
      spicedb: () => deps.spicedb.readSchema().then(() => true),
    },
    deps.metrics,
    deps.metricsEndpoint,
  );
  registerRoutes<GatewayDeps>(probes, wellKnownRoutes, deps, "");
  app.use(probes);

  const limit = rateLimit(deps.limiter, deps.defaultLimits, deps.orgLimits);
  const principal = resolvePrincipal(deps);
  // One for the API and the MCP proxy: a key is noted as used at most once a minute, whichever it called.
  const lastUsed = recordLastUsed(deps.store, deps.logger, deps.clock);
  const mcp: McpDeps = {
    ...deps.mcp,
    authorization: deps.authorization,
    audit: deps.audit,
    metrics: deps.metrics,
    logger: deps.logger,
    publicUrl: deps.publicUrl,
  };
  // The MCP proxy is a protected resource of its own: tokens addressed to it, and its own 401 and 403.
  app.use(
    mcpProxy(mcp, {
      assertions: deps.forward.assertions,
      redis: deps.redis,
      keys: deps.keys,
      authenticate: (audience) =>
        authenticate({
          keys: deps.keys,
          tokens: deps.tokens,
          audience,
          metrics: deps.metrics,
          clock: deps.clock,
          revokedFamilies: deps.oauth?.revokedFamilies,
        }),
      resolvePrincipal: principal,
      keyOwners: deps.keyOwners,
      rateLimit: limit,
      recordLastUsed: lastUsed,
      clock: deps.clock,
    }),
  );

  if (deps.oauth) {
    app.use(
      authorizationServer({
        ...deps.oauth,
        publicUrl: deps.publicUrl,
        tokens: deps.tokens,
        keys: deps.keys,
        mcp,
        signInLimits: deps.consoleSignInLimits,
        keyOwners: deps.keyOwners,
        metrics: deps.metrics,
        logger: deps.logger,
        clock: deps.clock,
      }),
    );
  }

  const api = Router();
  api.use(
    authenticate({
      keys: deps.keys,
      tokens: deps.tokens,
      audience: deps.publicUrl,
      metrics: deps.metrics,
      clock: deps.clock,
      revokedFamilies: deps.oauth?.revokedFamilies,
    }),
    principal,
    limit,
    lastUsed,
  );
  // Everything the service serves goes on, bodies untouched; the gateway parses only its own.
  const toService = forward(deps.forward);
  for (const area of ["/llm", "/sandbox", "/usage", "/guardrails"]) api.use(area, toService);
  // Organizations' own provider keys are key administration: an API key's, as `/admin` is.
  api.use("/providers", requireApiKey("Provider keys need an API key, not a token"), toService);
  api.use(jsonBody);
  registerRoutes<GatewayDeps>(api, [...authenticationRoutes, ...authorizationRoutes], deps);
  registerRoutes(api, mcpRoutes, mcp);

  api.use("/admin", requireApiKey("Key administration needs an API key, not a token"));
  // Administrators' reads (the admin console): `admin:console`, or for the trail either admin permission.
  registerRoutes<GatewayDeps>(api, adminReadRoutes, deps);
  api.use("/admin", requirePermission("admin:api-keys"));
  registerRoutes(api, apiKeyRoutes, {
    ...deps,
    budgets: new CountingWindows(deps.redis, { clock: deps.clock }),
  });

  app.use("/api/v1", api);
  if (deps.consoleSessions) {
    if (!deps.consoleSignInLimits) throw new Error("The admin console needs its sign-in limits");
    app.use(
      "/admin",
      createConsoleRouter({
        keys: deps.keys,
        sessions: deps.consoleSessions,
        signInLimits: deps.consoleSignInLimits,
        metrics: deps.metrics,
        api,
        publicUrl: deps.publicUrl,
        logger: deps.logger,
        clock: deps.clock,
      }),
    );
  }
  app.use(notFoundHandler);
  app.use(errorHandler(deps.logger));
  return app;
}
