import { createHash, randomUUID } from "node:crypto";
import { ASSERTION_HEADER, type InternalAssertions } from "@gw/core/internal-assertion";
import type { Logger } from "@gw/core/logger";
import {
  AnswerTooLarge,
  MCP_CALL,
  mcpProxyPath,
  type RequestSigner,
  type SessionOwner,
  UpstreamClients,
  UpstreamError,
  UpstreamPolicy,
  type UpstreamTarget,
} from "@gw/core/mcp";
import type { Principal } from "@gw/core/principal";
import type { CallToolResult, Tool } from "@modelcontextprotocol/sdk/types.js";

/** How the service reaches the gateway's MCP proxy for hosted MCP tools. */
export interface HostedMcpConfig {
  /** Where the service reaches the gateway (`GATEWAY_URL`). */
  gatewayUrl: string;
  /** The gateway's public URL (`GATEWAY_PUBLIC_URL`): `server_url` must be one of its proxy URLs. */
  gatewayPublicUrl: string;
  /** Signs the principal's assertion for each request to the proxy. */
  assertions: InternalAssertions;
  /** The MCP client that speaks to the proxy (`hostedMcpClients`). */
  clients: UpstreamClients;
  /** Largest answer of the proxy read, in bytes (`MCP_MAX_ANSWER_BYTES`). */
  maxAnswerBytes: number;
  /** For tests: hold an answer to approval requests between its steps. */
  hooks?: ApprovalHooks;
}

/** Where a test may hold an answer to approval requests (to force interleavings); each is given their ids. */
export interface ApprovalHooks {
  /** The answer was checked (the requests exist, are the principal's, unanswered) and its round admitted. */
  beforeClaim?: (ids: string[]) => Promise<void>;
  /** The requests are claimed; the approved calls run next. */
  afterClaim?: (ids: string[]) => Promise<void>;
}

/**
 * The MCP client of the gateway's proxy: the core's, as the proxy's own to its
 * upstreams (sessions, both protocol eras, the byte limit), allowed past the
 * address rules for `gatewayUrl` alone, the deployment's configured address
 * of the gateway; any other address is checked as a user's would be.
 */
export function hostedMcpClients(options: {
  gatewayUrl: string;
  /** Deadline of one request to the proxy, in milliseconds. */
  timeoutMs: number;
  maxAnswerBytes: number;
  logger?: Logger;
}): UpstreamClients {
  return new UpstreamClients({
    policy: new UpstreamPolicy({ allowPrivate: false, internalOrigin: options.gatewayUrl }),
    timeoutMs: options.timeoutMs,
    maxAnswerBytes: options.maxAnswerBytes,
    // The proxy holds the gateway's MCP_MAX_TOOLS_PER_SERVER; the answer's bytes are the service's limit.
    maxTools: Number.MAX_SAFE_INTEGER,
    ...(options.logger ? { logger: options.logger } : {}),
  });
}

/** What the proxy answered: its result, or why not (`status`: the HTTP status it refused with). */
export type ProxyAnswer<T> =
  | { ok: true; result: T }
  | { ok: false; status: number | undefined; message: string };

/** Lists the tools of a server the principal may call, through the gateway's proxy. */
export function proxyListTools(
  config: HostedMcpConfig,
  principal: Principal,
  serverId: string,
  signal: AbortSignal,
): Promise<ProxyAnswer<Tool[]>> {
  const { owner, target, signRequest } = asPrincipal(config, principal, serverId);
  return answered(config, config.clients.listTools(owner, target, {}, { signal, signRequest }));
}

/**
 * Calls a tool through the gateway's proxy as the principal: the same
 * authorization, vault, audit and request windows as any MCP client.
 */
export function proxyCallTool(
  config: HostedMcpConfig,
  principal: Principal,
  serverId: string,
  name: string,
  args: unknown,
  signal: AbortSignal,
): Promise<ProxyAnswer<CallToolResult>> {
  const { owner, target, signRequest } = asPrincipal(config, principal, serverId);
  // The model's arguments go as it wrote them: the proxy refuses what is not an object.
  const params = { name, arguments: args as Record<string, unknown> };
  return answered(config, config.clients.callTool(owner, target, {}, params, { signal, signRequest }));
}

function asPrincipal(
  config: HostedMcpConfig,
  principal: Principal,
  serverId: string,
): { owner: SessionOwner; target: UpstreamTarget; signRequest: RequestSigner } {
  const path = mcpProxyPath(serverId);
  return {
    // A session acts with the whole principal its requests assert (key, permissions, end user): one each.
    owner: {
      org: principal.org,
      user: principal.user,
      credential: createHash("sha256").update(JSON.stringify(principal)).digest("base64url"),
    },
    target: { id: serverId, name: "the gateway's MCP proxy", url: `${config.gatewayUrl}${path}` },
    // Each HTTP request carries its own assertion, bound to its method, path and a request id of its own.
    signRequest: async ({ method, url }) => {
      const requestId = `hosted-mcp-${randomUUID()}`;
      const assertion = await config.assertions.sign(principal, {
        method,
        path: `${url.pathname}${url.search}`,
        requestId,
      });
      return { "x-request-id": requestId, [ASSERTION_HEADER]: assertion };
    },
  };
}

/** The proxy's answer, or its failure told as a tool's error is: the proxy's own message, never a body. */
async function answered<T>(config: HostedMcpConfig, call: Promise<T>): Promise<ProxyAnswer<T>> {
  try {
    return { ok: true, result: await call };
  } catch (err) {
    if (!(err instanceof UpstreamError)) throw err;
    const status = err.httpStatus;
    const failed = (message: string) => ({ ok: false as const, status, message });
    if (status === 429) return failed("Rate limit exceeded");
    if (status === 403) return failed(`This credential lacks the '${MCP_CALL}' permission`);
    if (status !== undefined) return failed(`The gateway's MCP proxy answered HTTP ${status}`);
    switch (err.failure) {
      case "jsonrpc":
        return failed(err.rpcMessage ?? "The gateway's MCP proxy answered with an error");
      case "too_large":
      case "too_many_tools":
        return failed(`The gateway's MCP proxy ${new AnswerTooLarge(config.maxAnswerBytes).message}`);
      case "protocol":
        return failed("The gateway's MCP proxy answered with something that is not MCP");
      default:
        return failed("The gateway's MCP proxy could not be reached");
    }
  }
}
