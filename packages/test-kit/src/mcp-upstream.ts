/**
 * A small upstream MCP server for tests (the official SDK's `McpServer` over
 * its Streamable HTTP server transport, one session per client), which
 * records what it received: every HTTP request's headers, and every tool call
 * with the headers that came with it. Tools:
 * - `search`, `read_file` and `lookup` (annotated `readOnlyHint: true`),
 *   answering `found: <query>`, `contents of <path>` and `looked up: <text>`;
 * - `delete_file` and `send_email` (no hint: they need `writer` by default);
 * - `slow` (read-only), which answers only once the test calls `release()`.
 * Switches make it fail as real servers do: `500` (every request), `hang`
 * (never answers), `garbage` (200 with HTML), `redirect` (302 to `redirectTo`).
 * Or as hostile ones do: `toolList` answers `tools/list` with those tools
 * instead (thousands, odd names); `hugeAnswer` answers one method with an
 * answer of that many bytes (JSON or SSE), written as the reader takes it,
 * and records in `hugeAnswers` how much was written and whether the
 * connection closed before the end.
 * `pnpm exec node packages/test-kit/src/mcp-upstream.ts [port]` runs it by hand (or with `PORT`).
 */
import { randomUUID } from "node:crypto";
import { once } from "node:events";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { afterAll, beforeAll } from "vitest";
import { z } from "zod";

export type McpUpstreamMode = "ok" | "500" | "hang" | "garbage" | "redirect";

export interface RecordedCall {
  tool: string;
  arguments: Record<string, unknown>;
  headers: Record<string, string | string[] | undefined>;
}

/** What one huge answer came to: bytes handed to the socket, and how it ended. */
export interface HugeAnswerRecord {
  written: number;
  /** Every byte was written. */
  finished: boolean;
  /** The connection closed (by the reader) before the answer was finished. */
  cutOff: boolean;
}

export interface FakeMcpServer {
  /** The MCP endpoint, `http://127.0.0.1:<port>/mcp`. */
  url: string;
  port: number;
  /** Headers of every HTTP request, in order. */
  requests: { method: string; headers: Record<string, string | string[] | undefined> }[];
  calls: RecordedCall[];
  mode: McpUpstreamMode;
  /** Where `redirect` sends clients. */
  redirectTo: string;
  /** Answers `tools/list` with these tools instead of its own (unset: its own). */
  toolList: { name: string; annotations?: { readOnlyHint?: boolean } }[] | undefined;
  /** Answers `method` with a text of `bytes` bytes, as JSON or as one SSE event (unset: as usual). */
  hugeAnswer: { method: "tools/call" | "tools/list"; bytes: number; format: "json" | "sse" } | undefined;
  hugeAnswers: HugeAnswerRecord[];
  /** Lets held `slow` calls answer. */
  release(): void;
  /** Forgets every session, as a restarted server does: a request with an old session id gets 404. */
  forgetSessions(): void;
  close(): Promise<void>;
}

function newMcpServer(calls: RecordedCall[], current: () => IncomingMessage, held: (() => void)[]) {
  const server = new McpServer({ name: "fake-upstream", version: "1.0.0" });
  const record = (tool: string, args: Record<string, unknown>) =>
    calls.push({ tool, arguments: args, headers: { ...current().headers } });
  const readOnly = { readOnlyHint: true };
  server.registerTool(
    "search",
    { description: "Search the documents", inputSchema: { query: z.string() }, annotations: readOnly },
    async (args) => {
      record("search", args);
      return { content: [{ type: "text", text: `found: ${args.query}` }] };
    },
  );
  server.registerTool(
    "read_file",
    { description: "Read a file", inputSchema: { path: z.string() }, annotations: readOnly },
    async (args) => {
      record("read_file", args);
      return { content: [{ type: "text", text: `contents of ${args.path}` }] };
    },
  );
  server.registerTool(
    "lookup",
    { description: "Look a text up", inputSchema: { text: z.string() }, annotations: readOnly },
    async (args) => {
      record("lookup", args);
      return { content: [{ type: "text", text: `looked up: ${args.text}` }] };
    },
  );
  server.registerTool(
    "delete_file",
    { description: "Delete a file", inputSchema: { path: z.string() } },
    async (args) => {
      record("delete_file", args);
      return { content: [{ type: "text", text: `deleted ${args.path}` }] };
    },
  );
  server.registerTool(
    "send_email",
    {
      description: "Send an email",
      inputSchema: { to: z.string(), body: z.string() },
      annotations: { readOnlyHint: false, destructiveHint: true },
    },
    async (args) => {
      record("send_email", args);
      return { content: [{ type: "text", text: `sent to ${args.to}` }] };
    },
  );
  server.registerTool(
    "slow",
    { description: "Answers when released", inputSchema: {}, annotations: readOnly },
    async () => {
      record("slow", {});
      await new Promise<void>((resolve) => held.push(resolve));
      return { content: [{ type: "text", text: "released" }] };
    },
  );
  return server;
}

/**
 * A fake upstream for a test file: started before its tests, closed after them. What it returns stands for
 * the server once started (reading and setting `mode`, `url`, `requests`…), so a file reads as if it held it.
 */
export function useFakeMcpServer(): FakeMcpServer {
  let server: FakeMcpServer | undefined;
  beforeAll(async () => {
    server = await startFakeMcpServer();
  });
  afterAll(() => server?.close());
  const started = () => {
    if (!server) throw new Error("the fake MCP server is used before the file's beforeAll started it");
    return server;
  };
  return new Proxy({} as FakeMcpServer, {
    get: (_, name) => {
      const value = Reflect.get(started(), name);
      return typeof value === "function" ? value.bind(started()) : value;
    },
    set: (_, name, value) => Reflect.set(started(), name, value),
  });
}

export async function startFakeMcpServer(port = 0): Promise<FakeMcpServer> {
  const transports = new Map<string, StreamableHTTPServerTransport>();
  const held: (() => void)[] = [];
  let currentRequest: IncomingMessage | undefined;
  const fake = {
    requests: [],
    calls: [],
    hugeAnswers: [],
    toolList: undefined,
    hugeAnswer: undefined,
    mode: "ok",
    redirectTo: "http://127.0.0.1:9/mcp",
    release() {
      for (const resolve of held.splice(0)) resolve();
    },
    forgetSessions() {
      transports.clear();
    },
  } as unknown as FakeMcpServer;

  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    fake.requests.push({ method: req.method ?? "", headers: { ...req.headers } });
    if (fake.mode === "hang") return;
    if (fake.mode === "500") {
      res
        .writeHead(500, { "content-type": "text/plain" })
        .end("Internal error: db password hunter2 at 10.0.0.5");
      return;
    }
    if (fake.mode === "garbage") {
      res.writeHead(200, { "content-type": "application/json" }).end("<html>not json, secret=hunter2</html>");
      return;
    }
    if (fake.mode === "redirect") {
      res.writeHead(302, { location: fake.redirectTo }).end();
      return;
    }
    if (!req.url?.startsWith("/mcp")) {
      res.writeHead(404).end();
      return;
    }
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const body = chunks.length > 0 ? JSON.parse(Buffer.concat(chunks).toString("utf8")) : undefined;
    const sessionId = req.headers["mcp-session-id"];
    let transport = typeof sessionId === "string" ? transports.get(sessionId) : undefined;
    if (!transport) {
      if (typeof sessionId === "string" || body?.method !== "initialize") {
        res
          .writeHead(sessionId ? 404 : 400, { "content-type": "application/json" })
          .end(JSON.stringify({ jsonrpc: "2.0", error: { code: -32000, message: "No session" }, id: null }));
        return;
      }
      const fresh = new StreamableHTTPServerTransport({
        sessionIdGenerator: randomUUID,
        onsessioninitialized: (id) => {
          transports.set(id, fresh);
        },
      });
      fresh.onclose = () => {
        if (fresh.sessionId) transports.delete(fresh.sessionId);
      };
      await newMcpServer(fake.calls, () => currentRequest!, held).connect(fresh);
      transport = fresh;
    } else if (fake.toolList && body?.method === "tools/list") {
      const result = {
        tools: fake.toolList.map((t) => ({ inputSchema: { type: "object" }, ...t })),
      };
      res
        .writeHead(200, { "content-type": "application/json" })
        .end(JSON.stringify({ jsonrpc: "2.0", id: body.id, result }));
      return;
    } else if (fake.hugeAnswer && body?.method === fake.hugeAnswer.method) {
      await writeHuge(res, body.id, fake.hugeAnswer, fake.hugeAnswers);
      return;
    }
    currentRequest = req;
    await transport.handleRequest(req, res, body);
  };

  const server: Server = createServer((req, res) => {
    handle(req, res).catch((err: unknown) => {
      if (!res.headersSent) res.writeHead(500).end(String(err));
    });
  });
  await new Promise<void>((resolve) => server.listen(port, "127.0.0.1", resolve));
  const actual = (server.address() as AddressInfo).port;
  fake.port = actual;
  fake.url = `http://127.0.0.1:${actual}/mcp`;
  fake.close = async () => {
    fake.release();
    for (const transport of transports.values()) await transport.close().catch(() => undefined);
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  };
  return fake;
}

/**
 * A JSON-RPC answer whose one text (a tool result's, or a tool's
 * description) is `bytes` long, written 64 KiB at a time as the socket takes
 * it, until it is all written or the reader closes the connection.
 */
async function writeHuge(
  res: ServerResponse,
  id: unknown,
  { method, bytes, format }: NonNullable<FakeMcpServer["hugeAnswer"]>,
  records: HugeAnswerRecord[],
): Promise<void> {
  const record: HugeAnswerRecord = { written: 0, finished: false, cutOff: false };
  records.push(record);
  const closed = once(res, "close").then(() => {
    if (!record.finished) record.cutOff = true;
  });
  const [open, close] =
    method === "tools/call"
      ? ['{"content":[{"type":"text","text":"', '"}]}']
      : ['{"tools":[{"name":"huge","inputSchema":{"type":"object"},"description":"', '"}]}'];
  const message = [`{"jsonrpc":"2.0","id":${JSON.stringify(id)},"result":${open}`, `${close}}`];
  const [head, tail] =
    format === "sse" ? [`event: message\ndata: ${message[0]}`, `${message[1]}\n\n`] : message;
  res.writeHead(200, { "content-type": format === "sse" ? "text/event-stream" : "application/json" });
  const write = async (text: string) => {
    record.written += Buffer.byteLength(text);
    if (!res.write(text)) await Promise.race([once(res, "drain"), closed]);
  };
  const chunk = "x".repeat(65_536);
  await write(head!);
  for (let sent = 0; sent < bytes && !res.destroyed && !record.cutOff; sent += chunk.length)
    await write(chunk);
  if (res.destroyed || record.cutOff) return;
  await write(tail!);
  record.finished = true;
  res.end();
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const fake = await startFakeMcpServer(Number(process.argv[2] ?? process.env.PORT ?? 0));
  process.stdout.write(`fake MCP server on ${fake.url}\n`);
}

/** A request the relay passed on, as it came. */
export interface RelayedRequest {
  method: string;
  url: string;
  headers: Record<string, string>;
  body: string;
}

/**
 * An HTTP relay on a port known at once that passes every request on to a
 * target set later: a service that must know the gateway's URL before the
 * gateway (which needs the service's URL) has started reaches it through one.
 */

export async function startRelay(): Promise<{
  url: string;
  target: string;
  /** Every request passed on, oldest first. */
  requests: RelayedRequest[];
  close(): Promise<void>;
}> {
  const relay = { url: "", target: "", requests: [] } as unknown as Awaited<ReturnType<typeof startRelay>>;
  const forward = async (req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const headers = Object.fromEntries(
      Object.entries(req.headers).filter(
        ([k, v]) => typeof v === "string" && k !== "host" && k !== "content-length",
      ),
    ) as Record<string, string>;
    relay.requests.push({
      method: req.method ?? "GET",
      url: req.url ?? "",
      headers,
      body: Buffer.concat(chunks).toString("utf8"),
    });
    const answer = await fetch(`${relay.target}${req.url}`, {
      method: req.method ?? "GET",
      headers,
      ...(chunks.length > 0 ? { body: Buffer.concat(chunks) } : {}),
    });
    const body = Buffer.from(await answer.arrayBuffer());
    res
      .writeHead(answer.status, { "content-type": answer.headers.get("content-type") ?? "application/json" })
      .end(body);
  };
  const server = createServer((req, res) => {
    forward(req, res).catch(() => res.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  relay.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  relay.close = () =>
    new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    });
  return relay;
}
