import { UpstreamClients, UpstreamPolicy } from "@gw/core/mcp";
import { useFakeMcpServer } from "@gw/test-kit/mcp-upstream";
import { describe, expect, it } from "vitest";

describe("upstream MCP sessions", () => {
  const upstream = useFakeMcpServer();

  /** Sessions the upstream has seen opened: requests that carry no session id yet (`initialize`). */
  const opened = () => upstream.requests.filter((r) => r.headers["mcp-session-id"] === undefined).length;

  it("one per principal and server, kept while used; one more closes the least recently used, not the oldest", async () => {
    const policy = new UpstreamPolicy({ allowPrivate: true });
    const clients = new UpstreamClients({
      policy,
      timeoutMs: 5_000,
      maxSessions: 2,
      maxAnswerBytes: 1 << 20,
      maxTools: 100,
    });
    const server = { id: "mcp_sessions", name: "sessions", url: upstream.url };
    const list = (user: string) => clients.listTools({ org: "o", user }, server, {});
    try {
      const before = opened();
      await list("a");
      await list("b");
      expect(opened() - before).toBe(2);
      await list("a"); // a's session again: now b's is the least recently used
      expect(opened() - before).toBe(2);
      await list("c"); // one more than fits: b's session goes
      expect(opened() - before).toBe(3);
      await list("a");
      await list("c");
      expect(opened() - before).toBe(3);
      await list("b"); // b opens a new one
      expect(opened() - before).toBe(4);
    } finally {
      await clients.close();
    }
  });
});
