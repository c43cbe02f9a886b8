import { once } from "node:events";
import { createServer, type IncomingMessage, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { UpstreamClients, UpstreamPolicy } from "@gw/core/mcp";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

/**
 * A legacy-era upstream written by hand: `initialize` opens session `s-1`;
 * every later request is recorded and answered by `answer`, in whatever
 * pieces it returns, each written as its own chunk.
 */
let server: Server;
let url: string;
const seen: { headers: IncomingMessage["headers"]; body: { id?: unknown; method?: string } }[] = [];
let answer: (id: unknown) => { type: string; pieces: (string | Buffer)[] } = () => ({
  type: "application/json",
  pieces: [],
});

beforeAll(async () => {
  server = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const body = chunks.length ? JSON.parse(Buffer.concat(chunks).toString("utf8")) : {};
    if (body.method === "initialize") {
      res.writeHead(200, { "content-type": "application/json", "mcp-session-id": "s-1" });
      res.end(
        JSON.stringify({
          jsonrpc: "2.0",
          id: body.id,
          result: {
            protocolVersion: "2025-06-18",
            capabilities: { tools: {} },
            serverInfo: { name: "hand", version: "1" },
          },
        }),
      );
      return;
    }
    if (body.id === undefined) {
      res.writeHead(202).end(); // notifications/initialized
      return;
    }
    seen.push({ headers: req.headers, body });
    const { type, pieces } = answer(body.id);
    res.writeHead(200, { "content-type": type });
    for (const piece of pieces) {
      res.write(piece);
      await new Promise((resolve) => setImmediate(resolve));
    }
    res.end();
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`;
});
afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

const result = (id: unknown, text: string) =>
  JSON.stringify({ jsonrpc: "2.0", id, result: { content: [{ type: "text", text }] } });

describe("a session's requests after the SDK's handshake", () => {
  const clients = () =>
    new UpstreamClients({
      policy: new UpstreamPolicy({ allowPrivate: true }),
      timeoutMs: 5_000,
      maxAnswerBytes: 4_096,
      maxTools: 100,
    });
  const target = () => ({ id: "mcp_hand", name: "hand", url });

  it("carry the session's id and version, the call's credential, and an id of the gateway's own", async () => {
    const upstream = clients();
    answer = (id) => ({ type: "application/json", pieces: [result(id, "plain")] });
    try {
      const got = await upstream.callTool(
        { org: "o", user: "u" },
        target(),
        { authorization: "Bearer secret-1" },
        {
          name: "search",
          arguments: { q: "x" },
        },
      );
      expect(got.content).toEqual([{ type: "text", text: "plain" }]);
      const last = seen.at(-1)!;
      expect(last.headers["mcp-session-id"]).toBe("s-1");
      expect(last.headers["mcp-protocol-version"]).toBe("2025-06-18");
      expect(last.headers.authorization).toBe("Bearer secret-1");
      expect(last.body.method).toBe("tools/call");
      expect(String(last.body.id)).toMatch(/^gw-\d+$/);
    } finally {
      await upstream.close();
    }
  });

  it("read an SSE answer split anywhere, CRLF or LF, notifications first, multi-line data, a character cut in two", async () => {
    const upstream = clients();
    answer = (id) => {
      const message = result(id, "caf\u00e9 \u{1f600}");
      const bytes = Buffer.from(message, "utf8");
      // The response's JSON on two data lines; the emoji's four bytes split between two writes.
      const cut = bytes.indexOf(0xf0) + 2;
      const half = message.indexOf('"result"');
      const events =
        `: a comment\r\nevent: message\r\ndata: {"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":1}}\r\n\r\n` +
        `id: 7\ndata: ${message.slice(0, half)}\ndata: ${message.slice(half)}\n\n`;
      const all = Buffer.from(events, "utf8");
      const at = all.indexOf(bytes.subarray(0, cut)) + cut;
      return {
        type: "text/event-stream",
        pieces: [all.subarray(0, 5), all.subarray(5, at), all.subarray(at)],
      };
    };
    try {
      const got = await upstream.callTool({ org: "o", user: "u2" }, target(), {}, { name: "search" });
      expect(got.content).toEqual([{ type: "text", text: "caf\u00e9 \u{1f600}" }]);
    } finally {
      await upstream.close();
    }
  });
});
