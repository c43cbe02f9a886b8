import { createHash } from "node:crypto";
import { type AuditOutcome, auditActor } from "@gw/core/audit";
import type { Clock } from "@gw/core/clock";
import { AppError, ERROR_CAUSES, type ErrorCause, unauthorized } from "@gw/core/errors";
import { fromFramework, jsonBody, principalOf, unexpectedError } from "@gw/core/http";
import { ASSERTION_HEADER, type InternalAssertions } from "@gw/core/internal-assertion";
import {
  AnswerTooLarge,
  EraRefusal,
  isLegacyVersion,
  isModernRequest,
  LEGACY_PROTOCOL_VERSIONS,
  MCP_CALL,
  MCP_PROXY_ROUTE,
  MCP_SERVER_ID,
  META_SERVER_INFO,
  mcpProxyPath,
  mcpProxyUrl,
  PROTOCOL_VERSIONS,
  type SealedCredential,
  toolNameProblem,
  UNSUPPORTED_PROTOCOL_VERSION,
  UpstreamError,
  validateModernRequest,
} from "@gw/core/mcp";
import { assertMayActFor, type KeyOwners } from "@gw/core/on-behalf-of";
import type { Principal } from "@gw/core/principal";
import type { RedisClient } from "@gw/core/redis";
import { type ErrorRequestHandler, type Request, type RequestHandler, type Response, Router } from "express";
import type { ApiKeyLookup } from "../api-keys/lookup.ts";
import { keyUsable } from "../api-keys/types.ts";
import type { McpCallOutcome } from "../metrics.ts";
import { serverFor } from "./access.ts";
import { originOf, upstreamTools } from "./catalogue.ts";
import type { McpDeps } from "./deps.ts";

export { PROTOCOL_VERSIONS } from "@gw/core/mcp";

/** Where the proxy's protected-resource metadata is (RFC 9728: the resource's path under the well-known prefix). */
export const PROTECTED_RESOURCE_PREFIX = "/.well-known/oauth-protected-resource";
const metadataUrl = (publicUrl: string, id: string) =>
  `${publicUrl}${PROTECTED_RESOURCE_PREFIX}${mcpProxyPath(id)}`;

declare global {
  namespace Express {
    interface Locals {
      /** The principal came from the service's assertion (a hosted MCP tool of a response). */
      asserted?: boolean;
      /** A `tools/call`'s per-tool decision, asked beside the server's check (see the proxy's POST). */
      toolDecision?: EarlyToolCall;
    }
  }
}

/**
 * What a `tools/call` reads before its server's check has answered: the
 * tool's decision and the credential, still sealed (opened only once the
 * call is allowed).
 */
interface EarlyToolCall {
  name: string;
  allowed: Promise<boolean>;
  credential: Promise<SealedCredential>;
}

type JsonRpcId = string | number;
interface JsonRpcRequest {
  jsonrpc: "2.0";
  id?: JsonRpcId;
  method?: string;
  params?: Record<string, unknown>;
}

class RpcError extends Error {
  readonly code: number;
  /** The HTTP status it is answered with: 200 but for a modern era's unknown method (404). */
  readonly status: number;
  constructor(code: number, message: string, status = 200) {
    super(message);
    this.code = code;
    this.status = status;
  }
}

export interface ProxyOptions {
  /**
   * The service's word for a hosted MCP tool of a response: the principal the
   * gateway asserted to it, bound to this very request (method, path,
   * request id). Its key must still exist and be active.
   */
  assertions: InternalAssertions;
  /** Where used assertions are remembered: one is accepted once. */
  redis: Pick<RedisClient, "set">;
  keys: Pick<ApiKeyLookup, "findById">;
  /** Step 1 of the gateway's path (authenticate), made with `audience`. */
  authenticate: (audience: (req: Request) => string[]) => RequestHandler;
  resolvePrincipal: RequestHandler;
  /** An asserted principal's user is judged again, by the key's policy as it is now. */
  keyOwners: KeyOwners;
  /** The key's request windows: asked for each `tools/call` only. */
  rateLimit: RequestHandler;
  /** Notes when the key last authenticated a request (`lastUsedAt`), as every other route does. */
  recordLastUsed: RequestHandler;
  /** Its wall time decides whether the asserted key has expired. */
  clock: Clock;
}

/**
 * `MCP_PROXY_ROUTE` (`/api/v1/mcp/servers/{id}/mcp`): a Streamable HTTP MCP endpoint in front of
 * a registered server (docs/api/mcp.md). Stateless on the client side (each
 * POST is authenticated and decided on its own, on any replica, and answered
 * with JSON); upstream sessions are the gateway's, one per principal and
 * server. `initialize`, `ping` and `notifications/*` need `reader`;
 * `tools/list` lists only the tools the principal may call and `tools/call`
 * of any other tool is answered as for an unknown tool, each decided when it
 * is made; other methods are refused (`-32601`).
 */
export function mcpProxy(deps: McpDeps, options: ProxyOptions): Router {
  const router = Router();
  const PATH = MCP_PROXY_ROUTE;
  const audience = (req: Request) => [deps.publicUrl, mcpProxyUrl(deps.publicUrl, String(req.params.id))];
  const authenticate = options.authenticate(audience);
  // An OAuth 2.1 protected resource: a 401 says where its metadata is, a 403 which scope is missing.
  const authenticated: RequestHandler = async (req, res, next) => {
    const assertion = req.headers[ASSERTION_HEADER];
    if (typeof assertion === "string" && req.headers.authorization === undefined) {
      try {
        const { principal } = await options.assertions.verifyOnce(
          assertion,
          { method: req.method, path: req.originalUrl, requestId: req.id },
          options.redis,
        );
        const key = await options.keys.findById(principal.keyId);
        if (!key || key.org !== principal.org || !keyUsable(key, options.clock.wall()))
          throw unauthorized("The API key behind this call is not usable");
        await assertMayActFor(key, principal.user, "The user this call acts for", options.keyOwners);
        res.locals.apiKey = key;
        res.locals.principal = principal;
        res.locals.asserted = true;
      } catch (err) {
        return next(err);
      }
      return next();
    }
    const metadata = `resource_metadata="${metadataUrl(deps.publicUrl, String(req.params.id))}"`;
    try {
      await new Promise<void>((resolve, reject) => {
        Promise.resolve(authenticate(req, res, (err?: unknown) => (err ? reject(err) : resolve()))).catch(
          reject,
        );
      });
    } catch (err) {
      if (err instanceof AppError && err.code === "unauthorized") {
        warnIfOtherHost(req);
        const presented = req.headers.authorization !== undefined;
        return next(
          new AppError("unauthorized", err.message, {
            // The cause stays what authentication said (`revoked`, `invalid_api_key`, …).
            ...(Object.hasOwn(ERROR_CAUSES, err.reason) ? { reason: err.reason as ErrorCause } : {}),
            headers: {
              "WWW-Authenticate": `Bearer realm="gateway", ${presented ? 'error="invalid_token", ' : ""}${metadata}`,
            },
          }),
        );
      }
      return next(err);
    }
    next();
  };
  const mayCall: RequestHandler = (req, res, next) => {
    if (!principalOf(res).permissions.includes(MCP_CALL)) {
      const metadata = `resource_metadata="${metadataUrl(deps.publicUrl, String(req.params.id))}"`;
      throw new AppError("forbidden", `This credential lacks the '${MCP_CALL}' permission`, {
        reason: "missing_permission",
        headers: {
          "WWW-Authenticate": `Bearer error="insufficient_scope", scope="${MCP_CALL}", ${metadata}`,
        },
      });
    }
    next();
  };
  const principal: RequestHandler = (req, res, next) =>
    res.locals.asserted ? next() : options.resolvePrincipal(req, res, next);
  // The protected resource's URL is GATEWAY_PUBLIC_URL's: an OAuth client that came by another host
  // name refuses the metadata ("Protected resource … does not match"). Said once per host, up to a bound
  // (the Host header is the client's to choose).
  const publicHost = new URL(deps.publicUrl).host;
  const otherHostsSeen = new Set<string>();
  const warnIfOtherHost = (req: Request) => {
    const host = String(req.headers["x-forwarded-host"] ?? req.headers.host ?? "").slice(0, 255);
    if (!host || host === publicHost || otherHostsSeen.has(host) || otherHostsSeen.size >= 100) return;
    otherHostsSeen.add(host);
    deps.logger.warn(
      { host, publicUrl: deps.publicUrl },
      "an MCP client reached the proxy by a host name other than GATEWAY_PUBLIC_URL's: OAuth clients will refuse its protected-resource metadata (set GATEWAY_PUBLIC_URL to the URL clients use)",
    );
  };
  // Every refusal of a POST (whose body is, or was meant to be, one JSON-RPC message) is a JSON-RPC
  // error response too, with the request's id when it could be read, so that MCP clients that read
  // only the body show its message. The body is read here when the refusal came before it was.
  const bodyRead = new WeakSet<Request>();
  const readBody: RequestHandler = (req, res, next) => {
    bodyRead.add(req);
    jsonBody(req, res, next);
  };
  const refusalAsJsonRpc: ErrorRequestHandler = (thrown, req, res, next) => {
    if (req.method !== "POST" || res.headersSent || req.socket?.destroyed) return next(thrown);
    const err: unknown = fromFramework(thrown, req) ?? thrown;
    // Unexpected: logged and worded as the app's error handler does, answered as JSON-RPC's Internal error.
    const refusal = err instanceof AppError ? err : unexpectedError(err, req.id, deps.logger);
    const answer = () => {
      refusal.jsonRpcId = jsonRpcIdOf(req.body);
      next(refusal);
    };
    if (bodyRead.has(req)) return answer();
    readBody(req, res, (unreadable?: unknown) => {
      if (unreadable) req.body = undefined;
      answer();
    });
  };
  const guard = [authenticated, principal, options.recordLastUsed, mayCall];
  const notAllowed: RequestHandler = () => {
    throw new AppError("method_not_allowed", "This MCP endpoint answers POST only (no SSE stream)", {
      headers: { Allow: "POST" },
    });
  };
  router.get(PATH, ...guard, notAllowed);
  router.delete(PATH, ...guard, notAllowed);
  router.post(PATH, ...guard, readBody, async (req, res) => {
    const principal = principalOf(res);
    const version = req.headers["mcp-protocol-version"];
    const message = req.body as JsonRpcRequest | undefined;
    if (Array.isArray(message) || !message || typeof message !== "object" || message.jsonrpc !== "2.0") {
      res
        .status(400)
        .json(
          rpcError(
            null,
            -32600,
            "Send one JSON-RPC 2.0 message (batches are not part of this protocol version)",
          ),
        );
      return;
    }
    const modern = isModernRequest(typeof version === "string" ? version : undefined, message);
    // This revision defines no notifications over HTTP: one is accepted below as in the legacy era.
    if (modern && message.id !== undefined) {
      try {
        validateModernRequest(req.headers, message);
      } catch (err) {
        if (!(err instanceof EraRefusal)) throw err;
        res.status(err.status).json(rpcError(message.id ?? null, err.code, err.message, err.data));
        return;
      }
    } else if (!modern && typeof version === "string" && !isLegacyVersion(version)) {
      res.status(400).json(
        rpcError(message.id ?? null, UNSUPPORTED_PROTOCOL_VERSION, "Unsupported protocol version", {
          supported: [...PROTOCOL_VERSIONS],
          requested: version,
        }),
      );
      return;
    }
    const serverId = String(req.params.id);
    const toolName = message.method === "tools/call" ? message.params?.name : undefined;
    if (
      typeof toolName === "string" &&
      MCP_SERVER_ID.test(serverId) &&
      toolNameProblem(toolName, deps.limits.toolNameBytes) === undefined
    ) {
      // Reads that do not depend on the server's check, asked beside it: the decision is still
      // taken in order (no server the principal may read: 404, whatever the tool's check said), and
      // the credential stays sealed until the call is allowed.
      const allowed = deps.tools.mayCall(principal, serverId, toolName);
      const credential = deps.credentials.sealedFor(principal.org, serverId, principal.user);
      // Awaited by callTool, or dropped with the request they belonged to.
      allowed.catch(() => {});
      credential.catch(() => {});
      res.locals.toolDecision = { name: toolName, allowed, credential };
    }
    const server = await serverFor(deps, principal, serverId, "reader");
    if (typeof message.method !== "string" || message.id === undefined) {
      // A notification, or a response to a request this endpoint never makes: accepted, not forwarded.
      res.status(202).end();
      return;
    }
    const id = message.id;
    try {
      const answered = await (modern ? answerModern : answer)(
        deps,
        options,
        req,
        res,
        principal,
        server,
        message,
      );
      if (res.headersSent) return;
      const result = modern ? modernResult(server, answered) : answered;
      const body = JSON.stringify({ jsonrpc: "2.0", id, result });
      // Read within the limit, an upstream's answer may still grow as the proxy writes it again.
      if (Buffer.byteLength(body) > deps.limits.answerBytes) {
        deps.metrics.mcpUpstreamLimits.inc({ limit: "answer_bytes" });
        const tooLarge = new AnswerTooLarge(deps.limits.answerBytes).message;
        res.json(rpcError(id, -32603, `MCP server '${server.name}' (${server.id}) ${tooLarge}`));
        return;
      }
      res.type("application/json").send(body);
    } catch (err) {
      if (err instanceof RpcError) res.status(err.status).json(rpcError(id, err.code, err.message));
      else if (err instanceof UpstreamError) res.json(rpcError(id, err.rpcCode, err.message));
      else throw err;
    }
  });
  router.use(PATH, refusalAsJsonRpc);
  return router;
}

/** The id of the JSON-RPC request a refusal answers: `null` when it has none or could not be read. */
function jsonRpcIdOf(body: unknown): JsonRpcId | null {
  if (!body || typeof body !== "object" || Array.isArray(body)) return null;
  const { id } = body as JsonRpcRequest;
  return typeof id === "string" || typeof id === "number" ? id : null;
}

async function answer(
  deps: McpDeps,
  options: ProxyOptions,
  req: Request,
  res: Response,
  principal: Principal,
  server: Awaited<ReturnType<typeof serverFor>>,
  message: JsonRpcRequest,
): Promise<unknown> {
  const params = message.params ?? {};
  switch (message.method) {
    case "initialize": {
      const asked = params.protocolVersion;
      return {
        protocolVersion: isLegacyVersion(asked) ? asked : LEGACY_PROTOCOL_VERSIONS[0],
        capabilities: { tools: { listChanged: false } },
        serverInfo: { name: server.name, version: "1.0.0" },
        instructions: server.description ?? undefined,
      };
    }
    case "ping":
      return {};
    case "tools/list": {
      const tools = await upstreamTools(deps, principal, server);
      const callable = await deps.tools.callable(
        principal,
        server.id,
        tools.map((t) => t.name),
      );
      return { tools: tools.filter((t) => callable.has(t.name)) };
    }
    case "tools/call":
      await new Promise<void>((resolve, reject) =>
        Promise.resolve(
          options.rateLimit(req, res, (err?: unknown) => (err ? reject(err) : resolve())),
        ).catch(reject),
      );
      return callTool(deps, req.id, principal, server, params, res.locals.toolDecision);
    default:
      throw new RpcError(-32601, `Method not found: ${message.method} (this gateway proxies tools only)`);
  }
}

async function callTool(
  deps: McpDeps,
  requestId: string,
  principal: Principal,
  server: Awaited<ReturnType<typeof serverFor>>,
  params: Record<string, unknown>,
  early?: EarlyToolCall,
): Promise<unknown> {
  const name = params.name;
  const args = params.arguments;
  if (typeof name !== "string") throw new RpcError(-32602, "tools/call needs params.name, a tool name");
  // Before any decision or audit record: such a name is no tool of the gateway's.
  const problem = toolNameProblem(name, deps.limits.toolNameBytes);
  if (problem) throw new RpcError(-32602, `Invalid tool name: ${problem}`);
  if (args !== undefined && (typeof args !== "object" || args === null || Array.isArray(args)))
    throw new RpcError(-32602, "params.arguments must be an object");
  const started = performance.now();
  const argumentsSha256 = createHash("sha256")
    .update(JSON.stringify(args ?? {}))
    .digest("hex");
  // The record is written soon after the answer (`recordSoon`): a PostgreSQL round trip less on the call.
  const finish = (outcome: McpCallOutcome) => {
    const seconds = (performance.now() - started) / 1000;
    deps.metrics.mcpToolCalls.inc({ outcome });
    if (outcome !== "denied") deps.metrics.mcpToolCallSeconds.observe({ outcome }, seconds);
    const audited: AuditOutcome =
      outcome === "denied" ? "denied" : outcome === "upstream_error" ? "error" : "allowed";
    deps.audit.recordSoon(
      {
        organization: principal.org,
        actor: auditActor(principal),
        action: "call",
        resourceType: "mcp_server",
        resourceId: server.id,
        tool: name,
        decision: outcome === "denied" ? "denied" : "allowed",
        durationMs: Math.round(seconds * 1000),
        argumentsSha256,
        requestId,
      },
      audited,
    );
  };

  let allowed = await (early?.name === name ? early.allowed : deps.tools.mayCall(principal, server.id, name));
  if (!allowed) {
    // Maybe a tool not seen yet: the upstream's list gives it its default role, then the same decision.
    await upstreamTools(deps, principal, server);
    allowed = await deps.tools.mayCall(principal, server.id, name);
  }
  if (!allowed) {
    finish("denied");
    // Exactly what a tool that does not exist gets.
    throw new RpcError(-32602, `Unknown tool: ${name}`);
  }
  const { headers } = await deps.credentials.open(
    await (early?.credential ?? deps.credentials.sealedFor(principal.org, server.id, principal.user)),
    { id: server.id, origin: originOf(server) },
  );
  try {
    const result = await deps.upstreams.callTool(principal, server, headers, {
      name,
      ...(args !== undefined ? { arguments: args as Record<string, unknown> } : {}),
    });
    finish(result.isError === true ? "tool_error" : "ok");
    return result;
  } catch (err) {
    if (err instanceof UpstreamError) finish("upstream_error");
    throw err;
  }
}

const rpcError = (id: JsonRpcId | null, code: number, message: string, data?: unknown) => ({
  jsonrpc: "2.0" as const,
  id,
  error: { code, message, ...(data !== undefined ? { data } : {}) },
});

type ServerView = Awaited<ReturnType<typeof serverFor>>;

/**
 * A modern-era request (2026-07-28): no handshake and no `ping`;
 * `server/discover` answered by the gateway (it needs `reader`, as
 * `initialize`); `tools/list` and `tools/call` exactly as in the legacy era.
 */
async function answerModern(
  deps: McpDeps,
  options: ProxyOptions,
  req: Request,
  res: Response,
  principal: Principal,
  server: ServerView,
  message: JsonRpcRequest,
): Promise<unknown> {
  switch (message.method) {
    case "server/discover":
      return {
        supportedVersions: [...PROTOCOL_VERSIONS],
        capabilities: { tools: {} },
        ...(server.description ? { instructions: server.description } : {}),
        // Whether the principal may read this server can change with the next revoke.
        ttlMs: 0,
        cacheScope: "private",
      };
    case "tools/list": {
      const listed = (await answer(deps, options, req, res, principal, server, message)) as object;
      // The list is this principal's: a shared cache must not serve it to another.
      return { ...listed, ttlMs: 0, cacheScope: "private" };
    }
    case "tools/call":
      return answer(deps, options, req, res, principal, server, message);
    default:
      throw new RpcError(
        -32601,
        `Method not found: ${message.method} (this gateway proxies tools only)`,
        404,
      );
  }
}

/** Every modern result says it is complete, and names the server in its `_meta`. */
function modernResult(server: ServerView, result: unknown): unknown {
  const body = (result ?? {}) as Record<string, unknown>;
  const meta = (body._meta ?? {}) as Record<string, unknown>;
  return {
    ...body,
    resultType: "complete",
    _meta: { ...meta, [META_SERVER_INFO]: { name: server.name, version: "1.0.0" } },
  };
}
