import { UpstreamError } from "@gw/core/mcp";
import { type FakeMcpServer, startFakeMcpServer } from "@gw/test-kit/mcp-upstream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { hostedMcpClients } from "./hosted-mcp-proxy.ts";

/**
 * The hosted tools' MCP client reaches the gateway at its configured
 * internal address (loopback, plain http), which the address rules refuse
 * for anything a user names: the rules are lifted for that origin alone.
 */
describe("the hosted MCP client's way past the address rules", () => {
  let gateway: FakeMcpServer;
  let other: FakeMcpServer;
  beforeAll(async () => {
    gateway = await startFakeMcpServer();
    other = await startFakeMcpServer();
  });
  afterAll(async () => {
    await gateway?.close();
    await other?.close();
  });

  const owner = { org: "o", user: "u" };
  const clientsFor = (gatewayUrl: string) =>
    hostedMcpClients({ gatewayUrl, timeoutMs: 2_000, maxAnswerBytes: 1_048_576 });

  it("reaches the configured GATEWAY_URL's origin, and nothing else on the same host: another port, or the same port by another name", async () => {
    const clients = clientsFor(`http://127.0.0.1:${gateway.port}`);
    try {
      const tools = await clients.listTools(owner, { id: "mcp_a", name: "gw", url: gateway.url }, {});
      expect(tools.map((t) => t.name)).toContain("lookup");

      const before = { gateway: gateway.requests.length, other: other.requests.length };
      for (const url of [other.url, `http://localhost:${gateway.port}/mcp`]) {
        const failed = await clients
          .listTools(owner, { id: "mcp_b", name: "elsewhere", url }, {})
          .catch((e: unknown) => e);
        expect(failed, url).toBeInstanceOf(UpstreamError);
        expect((failed as UpstreamError).failure, url).toBe("refused");
      }
      expect(other.requests.length).toBe(before.other);
      expect(gateway.requests.length).toBe(before.gateway);
    } finally {
      await clients.close();
    }
  });
});
