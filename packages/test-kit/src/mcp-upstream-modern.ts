/**
 * A small upstream MCP server for tests that speaks only the 2026-07-28
 * revision (no SDK here speaks it yet): no `initialize`, no sessions; every
 * request must carry its version and capabilities in `_meta` and mirror its
 * method and name in `MCP-Protocol-Version`, `Mcp-Method` and `Mcp-Name`,
 * else `400` with `-32020` (HeaderMismatch), as the specification's server
 * validation says; a legacy `initialize` is refused so, as a modern-only
 * server does. Offers `search` (read-only) and `delete_file`, like the
 * legacy fake, and records every request and tool call with its headers.
 * `sse` answers `tools/call` as an SSE stream (a progress notification, then
 * the response).
 */
import { once } from "node:events";
import { createServer, type IncomingMessage } from "node:http";
import type { AddressInfo } from "node:net";

const VERSION = "2026-07-28";

export interface ModernRequestRecord {
  method: string | undefined;
  meta: Record<string, unknown> | undefined;
  headers: Record<string, string | string[] | undefined>;
}

export interface FakeModernMcpServer {
  url: string;
  requests: ModernRequestRecord[];
  calls: {
    tool: string;
    arguments: Record<string, unknown>;
    headers: Record<string, string | string[] | undefined>;
  }[];
  /** Answer `tools/call` as an SSE stream. */
  sse: boolean;
  close(): Promise<void>;
}

const TOOLS = [
  {
    name: "search",
    description: "Search the documents",
    inputSchema: { type: "object", properties: { query: { type: "string" } } },
    annotations: { readOnlyHint: true },
  },
  {
    name: "delete_file",
    description: "Delete a file",
    inputSchema: { type: "object", properties: { path: { type: "string" } } },
  },
];

const decode = (v: string) => {
  const m = /^=\?base64\?(.*)\?=$/.exec(v);
  return m ? Buffer.from(m[1] ?? "", "base64").toString("utf8") : v;
};

async function readJson(req: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return JSON.parse(Buffer.concat(chunks).toString("utf8"));
}

export async function startFakeModernMcpServer(): Promise<FakeModernMcpServer> {
  const fake = { requests: [], calls: [], sse: false } as unknown as FakeModernMcpServer;
  const server = createServer(async (req, res) => {
    const reply = (status: number, body: unknown) => {
      res.writeHead(status, { "content-type": "application/json" });
      res.end(JSON.stringify(body));
    };
    if (req.method !== "POST")
      return reply(405, { jsonrpc: "2.0", error: { code: -32600, message: "POST only" } });
    let message: { id?: string | number; method?: string; params?: Record<string, unknown> };
    try {
      message = (await readJson(req)) as typeof message;
    } catch {
      return reply(400, { jsonrpc: "2.0", id: null, error: { code: -32700, message: "Parse error" } });
    }
    const params = message.params ?? {};
    const meta = params._meta as Record<string, unknown> | undefined;
    fake.requests.push({ method: message.method, meta, headers: { ...req.headers } });
    const id = message.id ?? null;
    const mismatch = (why: string) =>
      reply(400, { jsonrpc: "2.0", id, error: { code: -32020, message: `Header mismatch: ${why}` } });
    const claimed = meta?.["io.modelcontextprotocol/protocolVersion"];
    if (req.headers["mcp-protocol-version"] !== claimed || claimed === undefined)
      return mismatch("MCP-Protocol-Version does not match params._meta");
    if (claimed !== VERSION)
      return reply(400, {
        jsonrpc: "2.0",
        id,
        error: {
          code: -32022,
          message: "Unsupported protocol version",
          data: { supported: [VERSION], requested: claimed },
        },
      });
    if (req.headers["mcp-method"] !== message.method) return mismatch("Mcp-Method does not match method");
    if (typeof meta?.["io.modelcontextprotocol/clientCapabilities"] !== "object")
      return reply(400, {
        jsonrpc: "2.0",
        id,
        error: { code: -32602, message: "clientCapabilities missing" },
      });
    const serverInfo = {
      "io.modelcontextprotocol/serverInfo": { name: "fake-modern-upstream", version: "1.0.0" },
    };
    switch (message.method) {
      case "server/discover":
        return reply(200, {
          jsonrpc: "2.0",
          id,
          result: {
            resultType: "complete",
            supportedVersions: [VERSION],
            capabilities: { tools: {} },
            _meta: serverInfo,
          },
        });
      case "tools/list":
        return reply(200, {
          jsonrpc: "2.0",
          id,
          result: { resultType: "complete", tools: TOOLS, ttlMs: 0, cacheScope: "public", _meta: serverInfo },
        });
      case "tools/call": {
        const name = req.headers["mcp-name"];
        if (typeof name !== "string" || decode(name) !== params.name)
          return mismatch("Mcp-Name does not match params.name");
        const args = (params.arguments ?? {}) as Record<string, unknown>;
        const tool = TOOLS.find((t) => t.name === params.name);
        if (!tool)
          return reply(200, {
            jsonrpc: "2.0",
            id,
            error: { code: -32602, message: `Unknown tool: ${String(params.name)}` },
          });
        fake.calls.push({ tool: tool.name, arguments: args, headers: { ...req.headers } });
        const text = tool.name === "search" ? `found: ${String(args.query)}` : `deleted ${String(args.path)}`;
        const response = {
          jsonrpc: "2.0",
          id,
          result: { resultType: "complete", content: [{ type: "text", text }] },
        };
        if (!fake.sse) return reply(200, response);
        res.writeHead(200, { "content-type": "text/event-stream" });
        res.write(
          `event: message\ndata: ${JSON.stringify({ jsonrpc: "2.0", method: "notifications/progress", params: { progressToken: 1, progress: 1 } })}\n\n`,
        );
        res.end(`event: message\ndata: ${JSON.stringify(response)}\n\n`);
        return;
      }
      default:
        return reply(404, {
          jsonrpc: "2.0",
          id,
          error: { code: -32601, message: `Method not found: ${message.method}` },
        });
    }
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  const { port } = server.address() as AddressInfo;
  fake.url = `http://127.0.0.1:${port}/mcp`;
  fake.close = () =>
    new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    });
  return fake;
}
