import { randomBytes } from "node:crypto";
import { createLogger, type Logger } from "@gw/core/logger";
import { newVaultKeys } from "@gw/core/mcp";
import { spicedbEnv } from "@gw/test-kit";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { gatewayConfigSchema } from "../../src/config.ts";
import { type GatewaySeams, type RunningGateway, startGateway } from "../../src/server.ts";
import type { GatewayHarness } from "../harness.ts";

/** One vault key for every replica of a test file: each must open what another sealed. */
export const VAULT_KEYS = newVaultKeys("t1");

export const MCP_ENV = {
  VAULT_KEYS,
  MCP_ALLOW_PRIVATE_UPSTREAMS: "true",
  MCP_UPSTREAM_TIMEOUT_MS: "1500",
  // Every test of a file registers its clients from one address.
  MCP_OAUTH_REGISTRATIONS_PER_ADDRESS: "10000",
};

/** Another replica of the harness's gateway: same Redis, SpiceDB, PostgreSQL, signing key and vault. */
export async function startReplica(
  gw: GatewayHarness,
  env: Record<string, string> = {},
  logger: Logger = createLogger("replica", "silent"),
  /** Its own clock and authorization hooks, when a test moves or holds this replica apart from the other. */
  seams: GatewaySeams = {},
): Promise<RunningGateway> {
  return startGateway(
    gatewayConfigSchema.parse({
      PORT: "0",
      HOST: "127.0.0.1",
      SERVICE_URL: "http://127.0.0.1:9",
      REDIS_URL: gw.redisUrl,
      GATEWAY_PUBLIC_URL: gw.publicUrl,
      JWT_SIGNING_KEYS: JSON.stringify({ keys: [gw.signingJwk] }),
      INTERNAL_ASSERTION_SECRET: randomBytes(32).toString("hex"),
      DATABASE_URL: gw.database.url,
      ...spicedbEnv(gw.spicedb),
      ...MCP_ENV,
      ...env,
    }),
    logger,
    seams,
  );
}

/** The official MCP client, connected to the proxy of `serverId` as `user` (X-On-Behalf-Of) or with a token. */
export async function mcpClient(
  baseUrl: string,
  serverId: string,
  credential: string,
  user?: string,
): Promise<Client> {
  const headers: Record<string, string> = { authorization: `Bearer ${credential}` };
  if (user) headers["x-on-behalf-of"] = user;
  const transport = new StreamableHTTPClientTransport(
    new URL(`${baseUrl}/api/v1/mcp/servers/${serverId}/mcp`),
    {
      requestInit: { headers },
    },
  );
  const client = new Client({ name: "test-client", version: "1.0.0" });
  await client.connect(transport);
  return client;
}

/** `fetch` against a base URL as `user` with `secret`. */
export function caller(baseUrl: string, secret: string) {
  return (user: string, path: string, init: { method?: string; json?: unknown } = {}) =>
    fetch(`${baseUrl}${path}`, {
      method: init.method ?? (init.json !== undefined ? "POST" : "GET"),
      headers: {
        authorization: `Bearer ${secret}`,
        "x-on-behalf-of": user,
        ...(init.json !== undefined ? { "content-type": "application/json" } : {}),
      },
      ...(init.json !== undefined ? { body: JSON.stringify(init.json) } : {}),
    });
}

/** One JSON-RPC request to the proxy of `serverId` as `user`: its HTTP status and body. */
export async function rpc(
  baseUrl: string,
  secret: string,
  user: string,
  serverId: string,
  method: string,
  params: Record<string, unknown> = {},
): Promise<{
  status: number;
  body: { result?: Record<string, unknown>; error?: { code: number; message: string } };
}> {
  const res = await fetch(`${baseUrl}/api/v1/mcp/servers/${serverId}/mcp`, {
    method: "POST",
    headers: {
      authorization: `Bearer ${secret}`,
      "x-on-behalf-of": user,
      "content-type": "application/json",
      accept: "application/json, text/event-stream",
    },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method, params }),
  });
  return { status: res.status, body: await res.json() };
}
