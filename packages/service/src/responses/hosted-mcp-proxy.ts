import { randomUUID } from "node:crypto";
import { ASSERTION_HEADER, type InternalAssertions } from "@gw/core/internal-assertion";
import {
  AnswerTooLarge,
  HOSTED_TOOLS_PROTOCOL_VERSION,
  MCP_CALL,
  mcpProxyPath,
  readBoundedJson,
} from "@gw/core/mcp";
import type { Principal } from "@gw/core/principal";

/** How the service reaches the gateway's MCP proxy for hosted MCP tools. */
export interface HostedMcpConfig {
  /** Where the service reaches the gateway (`GATEWAY_URL`). */
  gatewayUrl: string;
  /** The gateway's public URL (`GATEWAY_PUBLIC_URL`): `server_url` must be one of its proxy URLs. */
  gatewayPublicUrl: string;
  /** Signs the principal's assertion for each call to the proxy. */
  assertions: InternalAssertions;
  /** Deadline of one call to the proxy, in milliseconds. */
  timeoutMs: number;
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

export interface JsonRpcAnswer {
  result?: Record<string, unknown>;
  error?: { code: number; message: string };
}

/** Calls the gateway's MCP proxy as the principal: the same authorization, vault, audit and request windows as any MCP client. */
export async function proxyCall(
  config: HostedMcpConfig,
  principal: Principal,
  serverId: string,
  method: string,
  params: Record<string, unknown>,
  signal: AbortSignal,
): Promise<JsonRpcAnswer & { status: number }> {
  const path = mcpProxyPath(serverId);
  const requestId = `hosted-mcp-${randomUUID()}`;
  const assertion = await config.assertions.sign(principal, { method: "POST", path, requestId });
  let res: globalThis.Response;
  try {
    res = await fetch(`${config.gatewayUrl}${path}`, {
      method: "POST",
      headers: {
        "content-type": "application/json",
        accept: "application/json, text/event-stream",
        "mcp-protocol-version": HOSTED_TOOLS_PROTOCOL_VERSION,
        "x-request-id": requestId,
        [ASSERTION_HEADER]: assertion,
      },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method, params }),
      signal: AbortSignal.any([signal, AbortSignal.timeout(config.timeoutMs)]),
    });
  } catch {
    return { status: 0, error: { code: -32603, message: "The gateway's MCP proxy could not be reached" } };
  }
  if (res.status !== 200) {
    await res.body?.cancel().catch(() => undefined);
    const message =
      res.status === 429
        ? "Rate limit exceeded"
        : res.status === 403
          ? `This credential lacks the '${MCP_CALL}' permission`
          : `The gateway's MCP proxy answered HTTP ${res.status}`;
    return { status: res.status, error: { code: -32603, message } };
  }
  // Read as the proxy reads its upstreams: within the byte limit, the rest never read.
  let body: JsonRpcAnswer;
  try {
    body = (await readBoundedJson(res, config.maxAnswerBytes)) as JsonRpcAnswer;
  } catch (err) {
    if (!(err instanceof AnswerTooLarge)) return { status: 200 };
    return { status: 200, error: { code: -32603, message: `The gateway's MCP proxy ${err.message}` } };
  }
  return { status: 200, ...body };
}
