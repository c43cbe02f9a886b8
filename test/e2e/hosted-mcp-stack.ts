import { newVaultKeys } from "@gw/core/mcp";
import { type FakeMcpServer, startFakeMcpServer, startRelay } from "@gw/test-kit/mcp-upstream";
import { afterAll, beforeAll } from "vitest";
import { useStack } from "../../packages/service/test/stack.ts";

/**
 * A stack whose service reaches the gateway's MCP proxy by its public URL
 * (https://gateway.test, through a relay), with the test kit's MCP server
 * as the upstream; `register` has alice register it with a shared
 * credential `token` and makes bob a reader (he may call its read-only
 * tools). Call it in a `describe`: it adds that block's hooks.
 */
export function useHostedMcpStack() {
  let relay: Awaited<ReturnType<typeof startRelay>>;
  const serviceEnv: Record<string, string> = { GATEWAY_PUBLIC_URL: "https://gateway.test" };
  beforeAll(async () => {
    relay = await startRelay();
    serviceEnv.GATEWAY_URL = relay.url;
  });
  afterAll(() => relay?.close());
  const stack = useStack(serviceEnv, { MCP_ALLOW_PRIVATE_UPSTREAMS: "true", VAULT_KEYS: newVaultKeys() });
  let upstream: FakeMcpServer;
  beforeAll(async () => {
    relay.target = stack.gatewayUrl;
    upstream = await startFakeMcpServer();
  });
  afterAll(() => upstream?.close());

  async function register(token: string) {
    const { secret } = await stack.createKey();
    const { id } = await (
      await stack.call(secret, "/api/v1/mcp/servers", {
        user: "alice",
        json: { name: "docs", url: upstream.url },
      })
    ).json();
    await stack.call(secret, `/api/v1/mcp/servers/${id}/credentials/shared`, {
      method: "PUT",
      user: "alice",
      json: { type: "bearer", token },
    });
    await stack.call(secret, "/api/v1/authorization/llm/grant", {
      user: "alice",
      json: { resourceType: "mcp_server", resourceId: id, userId: "bob", role: "reader" },
    });
    return { secret, id: id as string, serverUrl: `https://gateway.test/api/v1/mcp/servers/${id}/mcp` };
  }
  return { stack, upstream: () => upstream, register };
}
